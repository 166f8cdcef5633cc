//! Log volumes in object storage (S3 and S3-compatible stores, GCS, Azure Blob, HTTP), read
//! through the `object_store` crate with ranged GETs.
//!
//! A remote volume is fetched in aligned blocks ([`BLOCK_BYTES`]) into a sparse temporary file
//! that the volume maps, so that pages are handed out exactly as from a local file (a slice of
//! a map that stays valid while the log set lives). A block is fetched once: the walk's
//! read-ahead fetches the blocks ahead of it several at a time, a random access (a chase, a
//! record of an older transaction) fetches the one block it needs, and a block being fetched
//! by one thread is waited for by the others, never fetched twice. Resident memory is bounded
//! as for local files: the walk drops the pages behind it from the process's map and the
//! kernel keeps or evicts the file's cached pages; the temporary files hold at most the blocks
//! fetched and are deleted with the log set.

use std::collections::HashMap;
use std::fs::File;
use std::io::IoSlice;
use std::ops::{Deref, Range};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use memmap2::Mmap;
use object_store::path::Path as StorePath;
use object_store::{GetOptions, ObjectStore, ObjectStoreExt, ObjectStoreScheme, RetryConfig};
use tokio::sync::Semaphore;
use url::Url;

use crate::error::{LogError, Result};

/// Bytes of one block: a ranged GET of this size amortises a request's latency, and a page
/// (4, 8 or 16 KiB) never straddles two blocks.
pub const BLOCK_BYTES: u64 = 2 << 20;
/// Bytes read at open from each volume: the header page and page 1 at the largest page size
/// (the page size of archives is inferred from page 1).
const HEAD_BYTES: u64 = 32 << 10;
/// Requests in flight at once: for one caller's fetch (the heads of many archives, the blocks
/// of a long record), and for the read-ahead of a log set.
const CONCURRENCY: usize = 16;

/// Bytes of a response gathered before they are written to the cache file in one call.
const WRITE_BATCH: u64 = 512 << 10;

/// The URL schemes read from object storage (`file://` is a local path).
const REMOTE_SCHEMES: [&str; 10] = ["s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss", "http", "https"];

/// Whether a path a caller gave is a URL of an object store (`s3://...`, `gs://...`, ...).
pub fn is_remote_url(s: &str) -> bool {
    match s.split_once("://") {
        Some((scheme, _)) => REMOTE_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()),
        None => false,
    }
}

/// A `file://` URL as a local path; other strings unchanged.
pub fn local_path(s: &str) -> PathBuf {
    match Url::parse(s) {
        Ok(u) if u.scheme() == "file" => u.to_file_path().unwrap_or_else(|_| PathBuf::from(s)),
        _ => PathBuf::from(s),
    }
}

/// How to reach object storage: the options of the store's builder (`aws_endpoint`,
/// `aws_access_key_id`, `google_service_account`, `azure_storage_account_name`, ... as the
/// `object_store` crate names them; its environment variables are read too), and walcdc's own:
/// `max_retries` (default 10) and `retry_timeout` (seconds, default 180) for transient errors,
/// `cache_dir` (where fetched blocks are kept while the log set is open; default: the
/// temporary directory, which should not be a RAM file system for logs larger than memory).
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    pub options: Vec<(String, String)>,
}

impl StoreOptions {
    pub fn new(options: Vec<(String, String)>) -> StoreOptions {
        StoreOptions { options }
    }

    fn retry(&self) -> Result<RetryConfig> {
        let mut retry = RetryConfig::default();
        for (k, v) in &self.options {
            let bad = || LogError::InvalidArgument { msg: format!("storage option {k}={v:?}: not a number") };
            match k.as_str() {
                "max_retries" => retry.max_retries = v.parse().map_err(|_| bad())?,
                "retry_timeout" => retry.retry_timeout = Duration::from_secs_f64(v.parse().map_err(|_| bad())?),
                _ => {}
            }
        }
        Ok(retry)
    }

    /// Where the volumes' blocks are kept (`cache_dir`; default: the temporary directory).
    fn cache_dir(&self) -> Option<PathBuf> {
        self.options.iter().rev().find(|(k, _)| k == "cache_dir").map(|(_, v)| PathBuf::from(v))
    }

    /// Option values that are secrets, to keep them out of every message.
    fn secrets(&self) -> Vec<String> {
        self.options
            .iter()
            .filter(|(k, v)| {
                let k = k.to_ascii_lowercase();
                v.len() >= 4
                    && ["key", "secret", "token", "password", "sas", "credential"].iter().any(|s| k.contains(s))
            })
            .map(|(_, v)| v.clone())
            .collect()
    }
}

/// The runtime the stores' futures run on, one per process (made again in a forked child,
/// where the parent's threads do not exist).
/// The runtime, and the process that made it.
type OwnedRuntime = (u32, Arc<tokio::runtime::Runtime>);

fn runtime() -> Result<Arc<tokio::runtime::Runtime>> {
    static RT: OnceLock<Mutex<Option<OwnedRuntime>>> = OnceLock::new();
    let mut held = RT.get_or_init(|| Mutex::new(None)).lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if let Some((owner, rt)) = held.as_ref() {
        if *owner == pid {
            return Ok(rt.clone());
        }
    }
    // TLS through rustls with ring; another provider installed first by the process is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("walcdc-store")
        .enable_all()
        .build()
        .map_err(|e| LogError::Io {
            file: "object store".into(),
            lsa: None,
            msg: format!("cannot start I/O threads: {e}"),
        })?;
    let rt = Arc::new(rt);
    // A runtime inherited from a parent process is forgotten, not dropped: its threads are gone.
    if let Some(old) = held.replace((pid, rt.clone())) {
        std::mem::forget(old);
    }
    Ok(rt)
}

/// The stores of one opening, one per bucket (or account, or host), and what they report.
pub(crate) struct Stores {
    options: StoreOptions,
    secrets: Vec<String>,
    by_origin: HashMap<String, Arc<dyn ObjectStore>>,
    rt: Arc<tokio::runtime::Runtime>,
    pub(crate) counters: Arc<Counters>,
}

/// Requests made and bytes fetched from object storage by a log set.
#[derive(Debug, Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
}

/// Where one volume lives.
pub(crate) struct Located {
    pub url: String,
    pub name: String,
    pub len: u64,
    store: Arc<dyn ObjectStore>,
    location: StorePath,
}

impl Stores {
    pub(crate) fn new(options: StoreOptions) -> Result<Stores> {
        Ok(Stores {
            secrets: options.secrets(),
            options,
            by_origin: HashMap::new(),
            rt: runtime()?,
            counters: Arc::new(Counters::default()),
        })
    }

    /// A message with every secret option value masked.
    fn redact(&self, msg: String) -> String {
        redact(&self.secrets, msg)
    }

    fn io_error(&self, url: &str, what: &str, e: object_store::Error) -> LogError {
        match e {
            object_store::Error::NotFound { .. } => {
                LogError::Io { file: url.to_string(), lsa: None, msg: format!("{what}: no such object") }
            }
            e => {
                LogError::Io { file: url.to_string(), lsa: None, msg: self.redact(format!("{what}: {}", describe(&e))) }
            }
        }
    }

    fn store(&mut self, url: &Url) -> Result<(Arc<dyn ObjectStore>, StorePath)> {
        let bad = |msg: String| LogError::InvalidArgument { msg: format!("{url}: {msg}") };
        let (scheme, path) = ObjectStoreScheme::parse(url).map_err(|e| bad(e.to_string()))?;
        let origin = format!("{}://{}", url.scheme(), url.authority());
        if let Some(s) = self.by_origin.get(&origin) {
            return Ok((s.clone(), path));
        }
        let retry = self.options.retry()?;
        let ours = |k: &str| matches!(k, "max_retries" | "retry_timeout" | "cache_dir");
        let options = self.options.options.iter().filter(|(k, _)| !ours(k));
        let config_error = |k: &str, e: object_store::Error| bad(self.redact(format!("storage option {k}: {e}")));
        // Each store's builder: the caller's options by the names it knows, then built.
        macro_rules! configured {
            ($builder:expr) => {{
                let mut b = $builder.with_retry(retry);
                for (k, v) in options {
                    b = b.with_config(k.to_ascii_lowercase().parse().map_err(|e| config_error(k, e))?, v);
                }
                Arc::new(b.build().map_err(|e| bad(self.redact(e.to_string())))?)
            }};
        }
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::AmazonS3 => {
                configured!(object_store::aws::AmazonS3Builder::from_env().with_url(url.as_str()))
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                configured!(object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(url.as_str()))
            }
            ObjectStoreScheme::MicrosoftAzure => {
                configured!(object_store::azure::MicrosoftAzureBuilder::from_env().with_url(url.as_str()))
            }
            ObjectStoreScheme::Http => {
                configured!(object_store::http::HttpBuilder::new().with_url(format!("{origin}/")))
            }
            other => return Err(bad(format!("{other:?} is not an object store walcdc reads"))),
        };
        self.by_origin.insert(origin, store.clone());
        Ok((store, path))
    }

    /// The log volumes the URLs name, in the order of the URLs: each names the object itself,
    /// or the volumes under it as a prefix (`s3://bucket/logs/` or `s3://bucket/logs`), as a
    /// directory names the volumes it holds. The URLs are looked up several at a time.
    pub(crate) fn locate(&mut self, urls: &[String], is_volume_name: impl Fn(&str) -> bool) -> Result<Vec<Located>> {
        let targets = urls
            .iter()
            .map(|text| {
                let url = Url::parse(text)
                    .map_err(|e| LogError::InvalidArgument { msg: format!("{text}: not a URL: {e}") })?;
                let (store, path) = self.store(&url)?;
                Ok((text.as_str(), store, path))
            })
            .collect::<Result<Vec<_>>>()?;
        let this = &*self;
        let lookups =
            targets.into_iter().map(|(text, store, path)| this.locate_one(text, store, path, &is_volume_name));
        let found = self.rt.block_on(stream::iter(lookups).buffered(CONCURRENCY).try_collect::<Vec<_>>())?;
        Ok(found.into_iter().flatten().collect())
    }

    async fn locate_one(
        &self,
        url_text: &str,
        store: Arc<dyn ObjectStore>,
        path: StorePath,
        is_volume_name: &impl Fn(&str) -> bool,
    ) -> Result<Vec<Located>> {
        let base = url_text.trim_end_matches('/');
        let name_of = |p: &StorePath| p.filename().unwrap_or_default().to_string();
        if !url_text.ends_with('/') {
            self.counters.requests.fetch_add(1, Ordering::Relaxed);
            match store.head(&path).await {
                Ok(meta) => {
                    let name = name_of(&meta.location);
                    return Ok(vec![Located { url: base.to_string(), name, len: meta.size, store, location: path }]);
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.io_error(url_text, "reading its metadata", e)),
            }
        }
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let prefix = if path.as_ref().is_empty() { None } else { Some(&path) };
        let listing = store.list_with_delimiter(prefix).await.map_err(|e| self.io_error(url_text, "listing", e))?;
        let mut found: Vec<Located> = listing
            .objects
            .into_iter()
            .filter(|m| is_volume_name(&name_of(&m.location)))
            .map(|m| {
                let name = name_of(&m.location);
                Located { url: format!("{base}/{name}"), name, len: m.size, store: store.clone(), location: m.location }
            })
            .collect();
        if found.is_empty() {
            return Err(LogError::Io {
                file: url_text.to_string(),
                lsa: None,
                msg: "no CUBRID log volumes (<db>_lgat, <db>_lgarNNN) under this prefix".into(),
            });
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(found)
    }

    /// Opens located volumes: each gets its cache file, and the first bytes of all of them
    /// (header pages) are fetched, several at a time.
    pub(crate) fn open(&self, located: Vec<Located>) -> Result<Vec<Arc<RemoteFile>>> {
        let in_flight = Arc::new(Semaphore::new(CONCURRENCY));
        let cache_dir = self.options.cache_dir();
        let files: Vec<Arc<RemoteFile>> = located
            .into_iter()
            .map(|l| {
                let shared = (self.counters.clone(), self.secrets.clone(), self.rt.clone(), in_flight.clone());
                RemoteFile::new(l, shared, cache_dir.as_deref()).map(Arc::new)
            })
            .collect::<Result<_>>()?;
        let heads = files.iter().map(|f| async move {
            let end = HEAD_BYTES.min(f.len);
            f.fetch_range(0..end).await
        });
        self.rt.block_on(stream::iter(heads).buffer_unordered(CONCURRENCY).try_collect::<Vec<()>>())?;
        Ok(files)
    }
}

/// Writes `chunks`, one after another, at `offset` of `file`.
fn write_all_at(file: &File, chunks: &[Bytes], mut offset: u64) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice> = chunks.iter().map(|c| IoSlice::new(c)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match rustix::io::pwritev(file, rest, offset) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                offset += n as u64;
                IoSlice::advance_slices(&mut rest, n);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// An error and its causes, outermost first: the store's own message often says only "error
/// sending request", and the reason (a refused certificate, a reset connection) is a cause.
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

fn redact(secrets: &[String], mut msg: String) -> String {
    for s in secrets {
        if msg.contains(s.as_str()) {
            msg = msg.replace(s.as_str(), "***");
        }
    }
    msg
}

/// What the volumes of one opening share: counters, secrets to mask, the runtime, and the
/// read-ahead's requests in flight.
type Shared = (Arc<Counters>, Vec<String>, Arc<tokio::runtime::Runtime>, Arc<Semaphore>);

const ABSENT: u8 = 0;
const FETCHING: u8 = 1;
const PRESENT: u8 = 2;

/// One volume in object storage, cached block by block in a sparse temporary file.
pub(crate) struct RemoteFile {
    pub url: String,
    pub name: String,
    pub len: u64,
    store: Arc<dyn ObjectStore>,
    location: StorePath,
    cache: File,
    map: Mmap,
    blocks: Vec<AtomicU8>,
    changed: Mutex<()>,
    ready: Condvar,
    counters: Arc<Counters>,
    secrets: Vec<String>,
    rt: Arc<tokio::runtime::Runtime>,
    /// Read-ahead requests in flight, for every volume of the log set.
    in_flight: Arc<Semaphore>,
}

/// A block this caller set to being fetched: made when the block is claimed, so that it goes
/// back to absent unless its fetch succeeds, whatever happens to the fetch (an error, a panic,
/// a fetch dropped before it ran), and the threads waiting for it wake. `F` is the volume as
/// the fetch holds it: a reference, or an `Arc` for a fetch that runs on its own.
struct Claim<F: Deref<Target = RemoteFile>> {
    file: F,
    block: usize,
    done: bool,
}

impl<F: Deref<Target = RemoteFile>> Claim<F> {
    /// Fetches the claimed block.
    async fn fetch(mut self) -> Result<()> {
        self.file.fetch_range(self.file.block_range(self.block)).await?;
        self.done = true;
        Ok(())
    }
}

impl<F: Deref<Target = RemoteFile>> Drop for Claim<F> {
    fn drop(&mut self) {
        let state = if self.done { PRESENT } else { ABSENT };
        self.file.blocks[self.block].store(state, Ordering::Release);
        let _guard = self.file.changed.lock().unwrap_or_else(|e| e.into_inner());
        self.file.ready.notify_all();
    }
}

impl RemoteFile {
    fn new(at: Located, shared: Shared, cache_dir: Option<&std::path::Path>) -> Result<RemoteFile> {
        let (counters, secrets, rt, in_flight) = shared;
        let io = |e: std::io::Error| LogError::Io {
            file: at.url.clone(),
            lsa: None,
            msg: format!("cannot make its cache file (storage option cache_dir, or the temporary directory): {e}"),
        };
        let cache = match cache_dir {
            Some(dir) => tempfile::tempfile_in(dir),
            None => tempfile::tempfile(),
        }
        .map_err(io)?;
        cache.set_len(at.len).map_err(io)?;
        // SAFETY: the map is of a private, unlinked file that only this volume writes, and only
        // into blocks not yet handed out (a block is written before it is marked present).
        let map = unsafe { Mmap::map(&cache) }.map_err(io)?;
        let nblocks = at.len.div_ceil(BLOCK_BYTES) as usize;
        Ok(RemoteFile {
            url: at.url,
            name: at.name,
            len: at.len,
            store: at.store,
            location: at.location,
            cache,
            map,
            blocks: (0..nblocks).map(|_| AtomicU8::new(ABSENT)).collect(),
            changed: Mutex::new(()),
            ready: Condvar::new(),
            counters,
            secrets,
            rt,
            in_flight,
        })
    }

    /// The cached bytes: meaningful only where [`RemoteFile::ensure`] has been called.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The map of the cache file (to drop pages behind a walk from the process's memory).
    pub(crate) fn map(&self) -> &Mmap {
        &self.map
    }

    fn block_range(&self, block: usize) -> Range<u64> {
        let start = block as u64 * BLOCK_BYTES;
        start..(start + BLOCK_BYTES).min(self.len)
    }

    /// Fetches `range` of the object into the cache file (no block bookkeeping). The body is
    /// written as it arrives, its chunks gathered into one `pwritev` per [`WRITE_BATCH`] bytes:
    /// no buffer of the whole range is made and filled first.
    async fn fetch_range(&self, range: Range<u64>) -> Result<()> {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let options = GetOptions::new().with_range(Some(range.clone()));
        let got = self.store.get_opts(&self.location, options).await.map_err(|e| self.error(&range, e))?;
        let mut body = got.into_stream();
        let (mut at, mut pending, mut pending_len) = (range.start, Vec::<Bytes>::new(), 0u64);
        loop {
            let chunk = body.next().await.transpose().map_err(|e| self.error(&range, e))?;
            let end = chunk.is_none();
            if let Some(chunk) = chunk {
                self.counters.bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                let room = (range.end - at - pending_len) as usize;
                pending_len += chunk.len().min(room) as u64;
                pending.push(chunk.slice(..chunk.len().min(room)));
            }
            if pending_len >= WRITE_BATCH || (end && pending_len > 0) {
                write_all_at(&self.cache, &pending, at).map_err(|e| LogError::Io {
                    file: self.url.clone(),
                    lsa: None,
                    msg: format!("writing its cache file: {e}"),
                })?;
                at += pending_len;
                pending.clear();
                pending_len = 0;
            }
            if end {
                break;
            }
        }
        if at < range.end {
            return Err(LogError::Truncated {
                file: self.url.clone(),
                lsa: None,
                msg: format!(
                    "the object holds {} bytes from offset {} where its listing promised {} (it changed after it was listed)",
                    at - range.start,
                    range.start,
                    range.end - range.start
                ),
            });
        }
        Ok(())
    }

    fn error(&self, range: &Range<u64>, e: object_store::Error) -> LogError {
        let what = format!("reading bytes {}..{}", range.start, range.end);
        match e {
            object_store::Error::NotFound { .. } => LogError::MissingArchive {
                file: self.url.clone(),
                lsa: None,
                msg: format!("{what}: the object is gone (deleted after the volumes were listed)"),
            },
            e => {
                let text = describe(&e);
                if text.contains("416") || text.contains("Range Not Satisfiable") || text.contains("InvalidRange") {
                    return LogError::Truncated {
                        file: self.url.clone(),
                        lsa: None,
                        msg: format!("{what}: the object is shorter than when it was listed"),
                    };
                }
                LogError::Io {
                    file: self.url.clone(),
                    lsa: None,
                    msg: redact(&self.secrets, format!("{what}: {text}")),
                }
            }
        }
    }

    /// Claims the absent blocks among `blocks` for this caller.
    fn claim(&self, blocks: Range<usize>) -> Vec<usize> {
        blocks
            .filter(|&b| {
                self.blocks[b].load(Ordering::Acquire) == ABSENT
                    && self.blocks[b].compare_exchange(ABSENT, FETCHING, Ordering::AcqRel, Ordering::Acquire).is_ok()
            })
            .collect()
    }

    fn blocks_of(&self, start: u64, len: u64) -> Range<usize> {
        let end = (start + len).min(self.len);
        if start >= end {
            return 0..0;
        }
        (start / BLOCK_BYTES) as usize..end.div_ceil(BLOCK_BYTES) as usize
    }

    /// Fetches the absent blocks among `blocks`, several at a time, and waits for them.
    fn fetch_absent(&self, blocks: Range<usize>) -> Result<()> {
        let claims: Vec<Claim<&RemoteFile>> =
            self.claim(blocks).into_iter().map(|block| Claim { file: self, block, done: false }).collect();
        if claims.is_empty() {
            return Ok(());
        }
        let fetches = claims.into_iter().map(Claim::fetch);
        self.rt.block_on(stream::iter(fetches).buffer_unordered(CONCURRENCY).try_collect::<Vec<()>>())?;
        Ok(())
    }

    /// Makes bytes `[start, start + len)` present in the cache: fetches the blocks no one has,
    /// waits for those another thread is fetching.
    pub(crate) fn ensure(&self, start: u64, len: u64) -> Result<()> {
        let blocks = self.blocks_of(start, len);
        if blocks.clone().all(|b| self.blocks[b].load(Ordering::Acquire) == PRESENT) {
            return Ok(());
        }
        loop {
            self.fetch_absent(blocks.clone())?;
            // What is left is being fetched by other threads: wait for it (a failed fetch
            // leaves its block absent, which the next turn claims and fetches again).
            let mut guard = self.changed.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                let states: Vec<u8> = blocks.clone().map(|b| self.blocks[b].load(Ordering::Acquire)).collect();
                if states.iter().all(|&s| s == PRESENT) {
                    return Ok(());
                }
                if states.contains(&ABSENT) {
                    break;
                }
                guard = self.ready.wait_timeout(guard, Duration::from_millis(200)).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
    }

    /// Starts fetching bytes `[start, start + len)` ahead of a walk, and returns: the fetches
    /// run on the runtime, [`CONCURRENCY`] at a time for the whole log set, so that a walk
    /// reading ahead keeps requests in flight without waiting for each batch of them. Errors
    /// are left for the walk's own fetch to report (the block is absent again).
    pub(crate) fn prefetch(self: &Arc<Self>, start: u64, len: u64) {
        for block in self.claim(self.blocks_of(start, len)) {
            let claim = Claim { file: self.clone(), block, done: false };
            let in_flight = self.in_flight.clone();
            self.rt.spawn(async move {
                let Ok(_permit) = in_flight.acquire_owned().await else { return };
                let _ = claim.fetch().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::PutPayload;

    #[test]
    fn urls_and_paths() {
        assert!(is_remote_url("s3://bucket/logs/"));
        assert!(is_remote_url("GS://bucket/x"));
        assert!(is_remote_url("abfss://c@a.dfs.core.windows.net/p"));
        assert!(is_remote_url("https://host/logs/db_lgat"));
        assert!(!is_remote_url("/var/lib/cubrid/log"));
        assert!(!is_remote_url("file:///var/log"));
        assert!(!is_remote_url("ftp://host/x"));
        assert_eq!(local_path("file:///var/lib/log"), PathBuf::from("/var/lib/log"));
        assert_eq!(local_path("relative/dir"), PathBuf::from("relative/dir"));
    }

    #[test]
    fn secrets_are_masked_and_retry_options_checked() {
        let opts = StoreOptions::new(vec![
            ("aws_secret_access_key".into(), "s3cr3t-value".into()),
            ("aws_region".into(), "us-east-1".into()),
            ("max_retries".into(), "3".into()),
        ]);
        assert_eq!(redact(&opts.secrets(), "denied for s3cr3t-value".into()), "denied for ***");
        assert_eq!(opts.retry().unwrap().max_retries, 3);
        let bad = StoreOptions::new(vec![("retry_timeout".into(), "soon".into())]);
        assert!(matches!(bad.retry(), Err(LogError::InvalidArgument { .. })));
    }

    /// Threads asking for the same bytes at once fetch each block once, and get the object's
    /// bytes.
    #[test]
    fn each_block_is_fetched_once() {
        let rt = runtime().unwrap();
        let store = Arc::new(InMemory::new());
        let data: Vec<u8> = (0..(5 * BLOCK_BYTES + 1234)).map(|i| (i % 251) as u8).collect();
        let location = StorePath::from("logs/db_lgar000");
        rt.block_on(store.put(&location, PutPayload::from(data.clone()))).unwrap();
        let counters = Arc::new(Counters::default());
        let at = Located {
            url: "memory://logs/db_lgar000".into(),
            name: "db_lgar000".into(),
            len: data.len() as u64,
            store,
            location,
        };
        let in_flight = Arc::new(Semaphore::new(4));
        let file = Arc::new(RemoteFile::new(at, (counters.clone(), Vec::new(), rt, in_flight), None).unwrap());
        let len = data.len() as u64;
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let file = &file;
                s.spawn(move || {
                    file.prefetch(t * 1000, 3 * BLOCK_BYTES);
                    file.ensure(0, len).unwrap();
                });
            }
        });
        assert_eq!(file.bytes(), &data[..]);
        assert_eq!(counters.bytes.load(Ordering::Relaxed), data.len() as u64);
        assert_eq!(counters.requests.load(Ordering::Relaxed), 6);
    }
}
