//! A log set: the active volume `<db>_lgat` and the archives `<db>_lgarNNN`, memory-mapped,
//! validated against each other, and a map from logical page ids to pages.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::Mmap;

use crate::error::{LogError, Result};
use crate::format::le::{i32_at, i64_at};
use crate::format::log_header::ActiveHeader;
use crate::format::lsa::Lsa;
use crate::format::page::{self, PageHeader, HEADER_PAGE_ID, PAGE_HEADER_SIZE};
#[cfg(feature = "object-store")]
use crate::log::remote::{self, RemoteFile, StoreOptions, Stores};
use crate::log::source::{Absent, Fetch, LogSource, Page, PageSource};

pub const ACTIVE_MAGIC: &[u8] = b"CUBRID/LogActive";
pub const ARCHIVE_MAGIC: &[u8] = b"CUBRID/LogArchive";
pub const VALID_PAGE_SIZES: [usize; 3] = [4096, 8192, 16384];
/// `sizeof(LOG_HEADER)`.
pub const ACTIVE_HEADER_SIZE: usize = 376;
/// `sizeof(LOG_ARV_HEADER)`.
pub const ARCHIVE_HEADER_SIZE: usize = 64;

/// Where a volume's bytes live: a read-only map of its file, memory (volumes built from bytes,
/// for tests and fuzzing), or an object in object storage, fetched block by block.
enum Backing {
    Map(Mmap),
    Memory(Vec<u8>),
    #[cfg(feature = "object-store")]
    Remote(std::sync::Arc<RemoteFile>),
}

/// One volume: a memory-mapped file (or bytes held in memory). A clone shares the mapping and
/// what was verified (a refreshed log set keeps its archives: see [`LogSet::refreshed`]).
#[derive(Clone)]
pub struct Volume {
    pub path: PathBuf,
    /// File name, used in messages and in the `file` column.
    pub name: String,
    map: Arc<Backing>,
    /// One bit per physical page whose checksum has been verified, so that a page holding many
    /// records is checked once, not once per record.
    verified: Arc<[AtomicU64]>,
}

impl Volume {
    fn open(path: &Path) -> Result<Volume> {
        let name =
            path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
        let io = |e: std::io::Error| LogError::Io { file: path.display().to_string(), lsa: None, msg: e.to_string() };
        let mut file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len < (PAGE_HEADER_SIZE + ACTIVE_HEADER_SIZE) as u64 {
            // Too short for a log header: say whether it could be the start of one at all.
            let mut head = Vec::with_capacity(len as usize);
            std::io::Read::read_to_end(&mut file, &mut head).map_err(io)?;
            check_holds_header(&name, &head)?;
        }
        // SAFETY: the volume is mapped read-only; a log volume that another process truncates
        // while it is mapped is outside what this reader supports (as for any mmap reader).
        let map = unsafe { Mmap::map(&file) }.map_err(io)?;
        Ok(Volume::with_backing(path.to_path_buf(), name, Backing::Map(map)))
    }

    /// A volume held in memory, named `name` (its file name decides its role, as on disk).
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<Volume> {
        check_holds_header(name, &bytes)?;
        Ok(Volume::with_backing(PathBuf::from(name), name.to_string(), Backing::Memory(bytes)))
    }

    /// A volume in object storage, its first bytes fetched.
    #[cfg(feature = "object-store")]
    fn remote(file: std::sync::Arc<RemoteFile>) -> Result<Volume> {
        let head = &file.bytes()[..(file.len as usize).min(PAGE_HEADER_SIZE + ACTIVE_HEADER_SIZE)];
        check_holds_header(&file.url, head)?;
        Ok(Volume::with_backing(PathBuf::from(&file.url), file.name.clone(), Backing::Remote(file)))
    }

    fn with_backing(path: PathBuf, name: String, map: Backing) -> Volume {
        let len = match &map {
            Backing::Map(m) => m.len(),
            Backing::Memory(b) => b.len(),
            #[cfg(feature = "object-store")]
            Backing::Remote(r) => r.len as usize,
        };
        // Pages are at least 4 KiB: one bit per 4 KiB is enough for any page size.
        let verified = (0..len.div_ceil(4096 * 64)).map(|_| AtomicU64::new(0)).collect();
        Volume { path, name, map: Arc::new(map), verified }
    }

    pub fn len(&self) -> usize {
        self.bytes().len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes().is_empty()
    }

    /// The volume's bytes. Of a volume in object storage, only those made present by
    /// [`Volume::ensure`] (and the header pages, fetched at open) are its bytes.
    pub fn bytes(&self) -> &[u8] {
        match &*self.map {
            Backing::Map(m) => m,
            Backing::Memory(b) => b,
            #[cfg(feature = "object-store")]
            Backing::Remote(r) => r.bytes(),
        }
    }

    /// What messages call the volume: its file name, or its URL in object storage.
    pub fn label(&self) -> &str {
        match &*self.map {
            #[cfg(feature = "object-store")]
            Backing::Remote(r) => &r.url,
            _ => &self.name,
        }
    }

    /// Whether the volume is read from object storage.
    pub fn is_remote(&self) -> bool {
        match &*self.map {
            #[cfg(feature = "object-store")]
            Backing::Remote(_) => true,
            _ => false,
        }
    }

    /// Bytes `[start, end)`, if the volume holds them: fetched from object storage first if
    /// they are not cached yet. One match per call: every page a reader fetches comes here.
    #[inline]
    fn range(&self, start: usize, end: usize) -> Result<Option<&[u8]>> {
        match &*self.map {
            Backing::Map(m) => Ok(m.get(start..end)),
            Backing::Memory(b) => Ok(b.get(start..end)),
            #[cfg(feature = "object-store")]
            Backing::Remote(r) => {
                if end > r.len as usize {
                    return Ok(None);
                }
                r.ensure(start as u64, (end - start) as u64)?;
                Ok(r.bytes().get(start..end))
            }
        }
    }

    /// Drops pages `[first, first + count)` (physical, of `page_size` bytes) from this process's
    /// resident memory: a forward walk calls it behind itself so that resident memory does not
    /// grow with the log. The bytes stay in the page cache and a later read maps them again.
    fn release(&self, first: usize, count: usize, page_size: usize) {
        #[cfg(unix)]
        let map = match &*self.map {
            Backing::Map(m) => Some(m),
            #[cfg(feature = "object-store")]
            Backing::Remote(r) => Some(r.map()),
            Backing::Memory(_) => None,
        };
        #[cfg(unix)]
        if let Some(m) = map {
            let start = first.saturating_mul(page_size).min(m.len());
            let len = count.saturating_mul(page_size).min(m.len() - start);
            if len > 0 {
                // SAFETY: the map is a shared, read-only map of a file: MADV_DONTNEED only drops
                // this process's mapping of the pages, and reading them again maps the same
                // file bytes (no slice handed out changes).
                let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
            }
        }
        #[cfg(not(unix))]
        let _ = (first, count, page_size);
    }

    /// [`Volume::release`] of the whole volume.
    fn release_whole(&self) {
        self.release(0, usize::MAX, 1);
    }

    /// Reads what the page cache lacks of pages `[first, first + count)` (see
    /// [`LogSet::prefetch_pages`]): large reads of the file whose bytes are dropped, then maps
    /// the pages into this process for the walk. A hint only: errors are ignored (the walk
    /// reports them).
    fn prefetch(&self, first: usize, count: usize, page_size: usize) {
        #[cfg(feature = "object-store")]
        if let Backing::Remote(r) = &*self.map {
            r.prefetch((first * page_size) as u64, (count * page_size) as u64);
            return;
        }
        #[cfg(unix)]
        if let Backing::Map(m) = &*self.map {
            use std::os::unix::fs::FileExt;
            // The system's page (4 KiB on x86-64; 16 or 64 KiB on some arm64 kernels): what
            // `mincore` gives one byte for.
            // SAFETY: sysconf reads a system constant.
            let os_page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(0).max(4096);
            let start = first.saturating_mul(page_size).min(m.len());
            let end = start + count.saturating_mul(page_size).min(m.len() - start);
            if start >= end {
                return;
            }
            // Which 4 KiB pages the cache holds already.
            let mut resident = vec![0u8; (end - start).div_ceil(os_page)];
            // SAFETY: the range lies in the map and `resident` has one byte per system page of
            // it. (A start off a system page, a 16 KiB log page on a 64 KiB-page kernel, is
            // refused: then everything is read, and mapping it ahead is refused too.)
            let rc = unsafe {
                libc::mincore(m.as_ptr().add(start) as *mut libc::c_void, end - start, resident.as_mut_ptr())
            };
            if rc != 0 {
                resident.fill(0);
            }
            // Only what the cache lacks is read (a log read again lacks a few pages at most:
            // reading all of it again cost a tenth of a change stream's time), in large reads.
            let runs = missing_runs(&resident, PREFETCH_GAP_PAGES);
            if !runs.is_empty() {
                let Ok(file) = std::fs::File::open(&self.path) else { return };
                let largest = runs.iter().map(|(lo, hi)| (hi - lo) * os_page).max().unwrap_or(0);
                let mut buf = vec![0u8; largest.min(1 << 20)];
                for (lo, hi) in runs {
                    let (mut at, to) = (start + lo * os_page, (start + hi * os_page).min(end));
                    while at < to {
                        let n = buf.len().min(to - at);
                        match file.read_at(&mut buf[..n], at as u64) {
                            Ok(0) | Err(_) => return,
                            Ok(read) => at += read,
                        }
                    }
                }
            }
            // Then mapped into this process in one call, so that the walk does not fault on
            // them page after page (a walk's faults and their unmapping were a third of its
            // time; populating costs less than the faults it spares). Linux 5.14 and later;
            // older kernels refuse it and the walk faults as before.
            // SAFETY: the range lies in the map (above); populating reads, it changes nothing.
            #[cfg(target_os = "linux")]
            unsafe {
                libc::madvise(m.as_ptr().add(start) as *mut libc::c_void, end - start, libc::MADV_POPULATE_READ);
            }
        }
        #[cfg(not(unix))]
        let _ = (first, count, page_size);
    }

    fn is_verified(&self, physical: usize) -> bool {
        self.verified[physical / 64].load(Ordering::Relaxed) & (1 << (physical % 64)) != 0
    }

    fn set_verified(&self, physical: usize) {
        self.verified[physical / 64].fetch_or(1 << (physical % 64), Ordering::Relaxed);
    }
}

/// Resident pages between two runs of missing ones below which the runs are read as one (a
/// read of a few cached pages costs less than another system call).
const PREFETCH_GAP_PAGES: usize = 64;

/// The runs `[lo, hi)` of pages `mincore` says are not resident (`resident[i] & 1 == 0`), runs
/// at most `gap` resident pages apart joined.
fn missing_runs(resident: &[u8], gap: usize) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (i, _) in resident.iter().enumerate().filter(|(_, r)| *r & 1 == 0) {
        match runs.last_mut() {
            Some(last) if i <= last.1 + gap => last.1 = i + 1,
            _ => runs.push((i, i + 1)),
        }
    }
    runs
}

/// A volume must at least hold a page header and a log header. A shorter one is a truncated
/// volume if what it holds could begin one (a magic, or a prefix of one, after the page
/// header; or nothing but zeros), and not a log volume at all otherwise (a stray text file).
fn check_holds_header(name: &str, bytes: &[u8]) -> Result<()> {
    if bytes.len() >= PAGE_HEADER_SIZE + ACTIVE_HEADER_SIZE {
        return Ok(());
    }
    let after = &bytes[bytes.len().min(PAGE_HEADER_SIZE)..];
    let could_begin = |magic: &[u8]| {
        let n = after.len().min(magic.len());
        after[..n] == magic[..n]
    };
    // Zeros are a volume not written yet (preallocated, or a copy under way).
    let unwritten = after.iter().all(|&b| b == 0);
    if !unwritten && !could_begin(ACTIVE_MAGIC) && !could_begin(ARCHIVE_MAGIC) {
        return Err(LogError::BadHeader {
            file: name.to_string(),
            msg: "no CUBRID/LogActive or CUBRID/LogArchive magic in the header page".into(),
        });
    }
    Err(LogError::Truncated {
        file: name.to_string(),
        lsa: None,
        msg: format!("{} bytes is too short to hold a log header", bytes.len()),
    })
}

/// One archive volume: `LOG_ARV_HEADER` and where the file sits in the set.
#[derive(Clone, Debug)]
pub struct Archive {
    pub vol: usize,
    pub num: i64,
    pub fpageid: i64,
    pub npages: i64,
    pub next_trid: i32,
    pub db_creation: i64,
}

impl Archive {
    pub fn last_pageid(&self) -> i64 {
        self.fpageid + self.npages - 1
    }
    pub fn contains(&self, pageid: i64) -> bool {
        pageid >= self.fpageid && pageid <= self.last_pageid()
    }
}

/// The active volume and its header.
#[derive(Clone, Debug)]
pub struct Active {
    pub vol: usize,
    pub header: ActiveHeader,
}

/// An opened, validated set of log volumes of one database.
pub struct LogSet {
    volumes: Vec<Volume>,
    pub page_size: usize,
    pub db_creation: i64,
    pub active: Option<Active>,
    /// Archives in number order, contiguous in numbers and in page ranges.
    pub archives: Vec<Archive>,
    /// The lowest logical page held by the set.
    pub first_pageid: i64,
    /// Pages fetched below a watched page (see [`LogSet::watch_below`]).
    watch: PageWatch,
    /// Bytes of all volumes (an upper bound for any length field, checked for every record).
    total_bytes: u64,
    /// The archive of the last page fetched: a walk asks for the same archive page after page,
    /// so it is tried before the search.
    last_archive: AtomicUsize,
    /// Some volume is read from object storage.
    remote: bool,
    /// What the volumes in object storage have cost so far.
    #[cfg(feature = "object-store")]
    store_counters: Option<std::sync::Arc<remote::Counters>>,
}

/// Records the pages fetched below a chosen page, to show that a reader started in the middle
/// of a log reads nothing before its start except what it asks for by random access. Costs one
/// relaxed load per fetch when unused.
#[derive(Debug)]
struct PageWatch {
    below: AtomicI64,
    pages: Mutex<BTreeSet<i64>>,
    /// Records read by random access ([`LogSet::record_at`]): chases, overflow rows, checks.
    random_reads: PerThreadCount,
}

impl Default for PageWatch {
    fn default() -> Self {
        PageWatch {
            below: AtomicI64::new(i64::MIN),
            pages: Mutex::new(BTreeSet::new()),
            random_reads: PerThreadCount::default(),
        }
    }
}

/// Slots of a [`PerThreadCount`].
const COUNT_SLOTS: usize = 16;

/// A counter the threads reading one log set add to at once: each thread adds to a slot of
/// its own, on a cache line of its own, for one shared counter would move between their cores
/// on every add (and with it what shares its line, read on every page fetch).
#[derive(Debug, Default)]
struct PerThreadCount([CacheLine; COUNT_SLOTS]);

#[derive(Debug, Default)]
#[repr(align(128))]
struct CacheLine(AtomicU64);

impl PerThreadCount {
    fn add_one(&self) {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        thread_local! {
            static SLOT: usize = (NEXT.fetch_add(1, Ordering::Relaxed) % COUNT_SLOTS as u64) as usize;
        }
        SLOT.with(|&slot| self.0[slot].0.fetch_add(1, Ordering::Relaxed));
    }

    fn total(&self) -> u64 {
        self.0.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }
}

/// What kind of volume a file name says it is.
#[derive(Debug, PartialEq, Eq)]
enum NameRole {
    Active,
    Archive(i64),
    Other,
}

fn name_role(name: &str) -> NameRole {
    if name.ends_with("_lgat") {
        return NameRole::Active;
    }
    if let Some(pos) = name.rfind("_lgar") {
        let digits = &name[pos + 5..];
        if digits.len() >= 3 && digits.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = digits.parse() {
                return NameRole::Archive(n);
            }
        }
    }
    NameRole::Other
}

/// Expands directories into the log volumes they hold (`*_lgat`, `*_lgarNNN`); explicit files
/// are kept as they are.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let rd = std::fs::read_dir(p).map_err(|e| LogError::Io {
                file: p.display().to_string(),
                lsa: None,
                msg: e.to_string(),
            })?;
            let mut found: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|f| f.is_file())
                .filter(|f| {
                    let n = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                    name_role(&n) != NameRole::Other
                })
                .collect();
            if found.is_empty() {
                return Err(LogError::Io {
                    file: p.display().to_string(),
                    lsa: None,
                    msg: "no CUBRID log volumes (<db>_lgat, <db>_lgarNNN) in this directory".into(),
                });
            }
            found.sort();
            out.extend(found);
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(LogError::Io {
                file: p.display().to_string(),
                lsa: None,
                msg: "no such file or directory".into(),
            });
        }
    }
    Ok(out)
}

fn floor_mod(a: i64, n: i64) -> i64 {
    ((a % n) + n) % n
}

impl LogSet {
    /// Opens a directory, or a list of volume files, and validates the set. With object
    /// storage built in, a path may also be a URL (`s3://bucket/prefix/`, see
    /// [`LogSet::open_with`]); `file://` URLs are local paths.
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> Result<LogSet> {
        #[cfg(feature = "object-store")]
        return LogSet::open_with(paths, &StoreOptions::default());
        #[cfg(not(feature = "object-store"))]
        {
            let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
            if paths.is_empty() {
                return Err(LogError::InvalidArgument { msg: "no log volume given".into() });
            }
            let files = expand(&paths)?;
            let volumes = files.iter().map(|p| Volume::open(p)).collect::<Result<Vec<_>>>()?;
            LogSet::from_volumes(volumes)
        }
    }

    /// As [`LogSet::open`], where paths may be URLs of object storage: a volume
    /// (`s3://bucket/logs/db_lgar001`) or a prefix holding volumes (`s3://bucket/logs/`), in
    /// S3 (and S3-compatible stores), GCS (`gs://`), Azure Blob (`az://`, `abfs://`) or over
    /// HTTP(S); `options` says how to reach them.
    #[cfg(feature = "object-store")]
    pub fn open_with<P: AsRef<Path>>(paths: &[P], options: &StoreOptions) -> Result<LogSet> {
        if paths.is_empty() {
            return Err(LogError::InvalidArgument { msg: "no log volume given".into() });
        }
        let mut urls = Vec::new();
        let mut local = Vec::new();
        for p in paths {
            let p = p.as_ref();
            match p.to_str() {
                Some(text) if remote::is_remote_url(text) => urls.push(text.to_string()),
                Some(text) => local.push(remote::local_path(text)),
                None => local.push(p.to_path_buf()),
            }
        }
        let files = expand(&local)?;
        let mut volumes = files.iter().map(|p| Volume::open(p)).collect::<Result<Vec<_>>>()?;
        let mut counters = None;
        if !urls.is_empty() {
            let mut stores = Stores::new(options.clone())?;
            let located = stores.locate(&urls, |name| name_role(name) != NameRole::Other)?;
            counters = Some(stores.counters.clone());
            for file in stores.open(located)? {
                volumes.push(Volume::remote(file)?);
            }
        }
        let mut set = LogSet::from_volumes(volumes)?;
        set.store_counters = counters;
        Ok(set)
    }

    /// Drops every page of the set from this process's resident memory (they stay in the
    /// page cache; a later read maps them again). The kernel maps what the page cache holds
    /// around each page touched (1.7 MB a volume here): validating a set reads each volume's
    /// header page (440 MB for the 258 volumes of a 16 GB set, held until a walk passed each
    /// volume), and a step of a plan walks many short ranges, each leaving a little mapped
    /// around its ends.
    pub fn release_all(&self) {
        for v in &self.volumes {
            v.release_whole();
        }
    }

    /// The log set as it is now, for a reader that follows a live log: `paths` (local files
    /// and directories) listed again, each archive this set holds kept as it is (a written
    /// archive never changes: its map and the pages already verified carry over, and nothing is
    /// opened or checked again), every other volume (the active one, new archives) opened. A
    /// poll thus costs the listing and the new volumes, not the whole history.
    pub fn refreshed(&self, paths: &[PathBuf]) -> Result<LogSet> {
        let kept: HashMap<&Path, &Volume> =
            self.archives.iter().map(|a| (self.volumes[a.vol].path.as_path(), &self.volumes[a.vol])).collect();
        let volumes = expand(paths)?
            .iter()
            .map(|path| match kept.get(path.as_path()) {
                // The same archive, unless the file at its path is another now.
                Some(v) if std::fs::metadata(path).is_ok_and(|m| m.len() == v.len() as u64) => Ok((*v).clone()),
                _ => Volume::open(path),
            })
            .collect::<Result<Vec<_>>>()?;
        LogSet::from_volumes(volumes)
    }

    /// Whether the two volumes share their mapping (a volume kept by [`LogSet::refreshed`]).
    pub fn shares_volume(&self, other: &LogSet, vol: usize, other_vol: usize) -> bool {
        Arc::ptr_eq(&self.volumes[vol].map, &other.volumes[other_vol].map)
    }

    /// Requests made to object storage and bytes fetched from it so far (zeros for a log set
    /// of local files).
    pub fn fetched(&self) -> (u64, u64) {
        #[cfg(feature = "object-store")]
        if let Some(c) = &self.store_counters {
            return (c.requests.load(Ordering::Relaxed), c.bytes.load(Ordering::Relaxed));
        }
        (0, 0)
    }

    /// Whether any volume is read from object storage.
    pub fn is_remote(&self) -> bool {
        self.remote
    }

    /// A log set of volumes held in memory: `(file name, bytes)` pairs, validated as
    /// [`LogSet::open`] validates files.
    pub fn from_memory(volumes: Vec<(String, Vec<u8>)>) -> Result<LogSet> {
        if volumes.is_empty() {
            return Err(LogError::InvalidArgument { msg: "no log volume given".into() });
        }
        let volumes = volumes.into_iter().map(|(n, b)| Volume::from_bytes(&n, b)).collect::<Result<Vec<_>>>()?;
        LogSet::from_volumes(volumes)
    }

    /// Validates opened volumes as one log set.
    fn from_volumes(opened: Vec<Volume>) -> Result<LogSet> {
        let mut volumes = Vec::new();
        let mut active: Option<Active> = None;
        let mut raw_archives: Vec<(Archive, Option<i64>)> = Vec::new();

        for vol in opened {
            let b = vol.bytes();
            let ph = PageHeader::parse(b);
            let body = &b[PAGE_HEADER_SIZE..];
            let idx = volumes.len();
            let by_name = name_role(&vol.name);
            let is_active = body.starts_with(ACTIVE_MAGIC) && body[ACTIVE_MAGIC.len()] == 0;
            let is_archive = body.starts_with(ARCHIVE_MAGIC) && body[ARCHIVE_MAGIC.len()] == 0;
            if (is_active && matches!(by_name, NameRole::Archive(_))) || (is_archive && by_name == NameRole::Active) {
                return Err(LogError::BadHeader {
                    file: vol.label().to_string(),
                    msg: format!(
                        "the file name says {}, the header says {}",
                        if is_active { "archive" } else { "active volume" },
                        if is_active { "active volume" } else { "archive" }
                    ),
                });
            }
            if is_active {
                let h = checked_active_header(&vol, &ph)?;
                if let Some(a) = &active {
                    return Err(LogError::Mismatch {
                        file: vol.label().to_string(),
                        msg: format!(
                            "a second active volume in the set (already have {})",
                            volumes_name(&volumes, a.vol)
                        ),
                    });
                }
                active = Some(Active { vol: idx, header: h });
            } else if is_archive {
                raw_archives.push(checked_archive_header(&vol, &ph, idx, by_name)?);
            } else {
                return Err(LogError::BadHeader {
                    file: vol.label().to_string(),
                    msg: "no CUBRID/LogActive or CUBRID/LogArchive magic in the header page".into(),
                });
            }
            // Its header page is read: not kept mapped (see `LogSet::release_all`).
            vol.release_whole();
            volumes.push(vol);
        }

        // Page size: from the active header, else inferred from the archives.
        let page_size = match &active {
            Some(a) => a.header.db_logpagesize as usize,
            None => {
                infer_archive_page_size(&volumes, &raw_archives.iter().map(|(a, _)| a.clone()).collect::<Vec<_>>())?
            }
        };

        let db_creation = match (&active, raw_archives.first()) {
            (Some(a), _) => a.header.db_creation,
            (None, Some((a, _))) => a.db_creation,
            (None, None) => unreachable!("every volume is an active volume or an archive"),
        };
        let mut archives: Vec<Archive> = raw_archives.into_iter().map(|(a, _)| a).collect();
        for a in &archives {
            check_archive(&volumes[a.vol], a, db_creation, page_size)?;
            volumes[a.vol].release_whole();
        }
        archives.sort_by_key(|a| a.num);
        check_archive_sequence(&volumes, &archives)?;
        check_active_and_archives(&volumes, &active, &archives)?;

        let total_bytes = volumes.iter().map(|v| v.len() as u64).sum();
        let remote = volumes.iter().any(Volume::is_remote);
        let mut set = LogSet {
            volumes,
            page_size,
            db_creation,
            active,
            archives,
            first_pageid: 0,
            watch: PageWatch::default(),
            total_bytes,
            last_archive: AtomicUsize::new(0),
            remote,
            #[cfg(feature = "object-store")]
            store_counters: None,
        };
        set.first_pageid = set.compute_first_pageid()?;
        // Validation dropped each volume's header as soon as it was read, so that an open's
        // peak does not grow with the number of volumes; what it touched since goes too.
        set.release_all();
        Ok(set)
    }

    /// `LOGAREA_SIZE`: bytes of a page after its header.
    pub fn area_size(&self) -> usize {
        self.page_size - PAGE_HEADER_SIZE
    }

    pub fn volumes(&self) -> &[Volume] {
        &self.volumes
    }

    /// What messages call volume `vol`: its file name, or its URL in object storage.
    pub fn volume_name(&self, vol: usize) -> &str {
        self.volumes[vol].label()
    }

    pub fn header(&self) -> Option<&ActiveHeader> {
        self.active.as_ref().map(|a| &a.header)
    }

    /// The first page the active header says is not archived (`nxarv_pageid`), or, without an
    /// active volume, the page after the last archive.
    pub fn nxarv_pageid(&self) -> i64 {
        match (&self.active, self.archives.last()) {
            (Some(a), _) => a.header.nxarv_pageid,
            (None, Some(l)) => l.last_pageid() + 1,
            (None, None) => 0,
        }
    }

    /// Name used in messages for a page nobody holds.
    pub fn set_name(&self) -> String {
        match &self.active {
            Some(a) => self.volumes[a.vol].label().to_string(),
            None => self.volumes[self.archives[0].vol].label().to_string(),
        }
    }

    fn archive_for(&self, pageid: i64) -> Option<&Archive> {
        let first = self.archives.first()?;
        if pageid < first.fpageid {
            return None;
        }
        let hint = self.last_archive.load(Ordering::Relaxed);
        if let Some(a) = self.archives.get(hint).filter(|a| a.contains(pageid)) {
            return Some(a);
        }
        // Archives tile the page space contiguously, but are not all the same size: search.
        let i = self.archives.partition_point(|a| a.last_pageid() < pageid);
        let found = self.archives.get(i).filter(|a| a.contains(pageid));
        if found.is_some() {
            self.last_archive.store(i, Ordering::Relaxed);
        }
        found
    }

    /// Total bytes of all volumes: an upper bound for any length field (summed once, at open:
    /// it is checked for every record, and a log set may have hundreds of volumes).
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Tells the system that logical pages `[from, to)` will not be read soon (see
    /// [`Volume::release`]): where a forward walk has passed, so that its resident memory stays
    /// bounded however long the log. Reading them again stays correct, only slower.
    pub fn release_pages(&self, from: i64, to: i64) {
        self.for_page_runs(from, to, |v, first, count| v.release(first, count, self.page_size));
    }

    /// Reads the pages `[from, to)` into the page cache where it lacks them and maps them
    /// ([`Volume::prefetch`]): the read-ahead thread calls it ahead of a forward walk, so that
    /// reading a log larger than the page cache from disk overlaps decoding instead of stalling
    /// the walk on each page fault, and the walk does not fault on pages the cache holds.
    pub fn prefetch_pages(&self, from: i64, to: i64) {
        self.for_page_runs(from, to, |v, first, count| v.prefetch(first, count, self.page_size));
    }

    /// Calls `f(volume, first physical page, count)` for each run of the pages `[from, to)`
    /// that lie next to each other in one volume.
    fn for_page_runs(&self, from: i64, to: i64, mut f: impl FnMut(&Volume, usize, usize)) {
        let mut run: Option<(usize, i64, i64)> = None; // (volume, first physical, count)
        let mut flush = |r: Option<(usize, i64, i64)>| {
            if let Some((vol, first, count)) = r {
                f(&self.volumes[vol], first as usize, count as usize);
            }
        };
        for pageid in from.max(0)..to {
            let at = match (self.archive_for(pageid), &self.active) {
                (Some(a), _) => (a.vol, pageid - a.fpageid + 1),
                (None, Some(act)) => match self.ring_slot(pageid) {
                    Some(slot) => (act.vol, slot),
                    None => continue,
                },
                (None, None) => continue,
            };
            run = match run {
                Some((vol, first, count)) if vol == at.0 && first + count == at.1 => Some((vol, first, count + 1)),
                other => {
                    flush(other);
                    Some((at.0, at.1, 1))
                }
            };
        }
        flush(run);
    }

    /// The bytes of physical page `physical` of volume `vol`, if the volume is long enough
    /// (fetched first from object storage, for a remote volume).
    fn page_bytes(&self, vol: usize, physical: i64) -> Result<Option<&[u8]>> {
        let Some(start) = (physical as usize).checked_mul(self.page_size) else { return Ok(None) };
        self.volumes[vol].range(start, start.saturating_add(self.page_size))
    }

    /// The ring slot (physical page) of a logical page in the active volume.
    pub fn ring_slot(&self, pageid: i64) -> Option<i64> {
        let a = self.active.as_ref()?;
        let n = a.header.npages as i64;
        Some(floor_mod(pageid - a.header.fpageid, n) + 1)
    }

    fn ring_holds(&self, pageid: i64) -> Result<bool> {
        Ok(match (&self.active, self.ring_slot(pageid)) {
            (Some(a), Some(slot)) => {
                self.page_bytes(a.vol, slot)?.map(|b| PageHeader::parse(b).logical_pageid == pageid).unwrap_or(false)
            }
            _ => false,
        })
    }

    /// From now on, remembers every page below `pageid` that is fetched (and forgets those
    /// remembered so far).
    pub fn watch_below(&self, pageid: i64) {
        self.watch.pages.lock().unwrap_or_else(|e| e.into_inner()).clear();
        self.watch.below.store(pageid, Ordering::Relaxed);
    }

    /// How many records were read by random access so far (a measure of the work chases do
    /// beyond the forward walk; it must stay proportional to the records walked).
    pub fn random_reads(&self) -> u64 {
        self.watch.random_reads.total()
    }

    pub(crate) fn count_random_read(&self) {
        self.watch.random_reads.add_one();
    }

    /// The pages below the watched page fetched since [`LogSet::watch_below`].
    pub fn watched_pages(&self) -> Vec<i64> {
        self.watch.pages.lock().unwrap_or_else(|e| e.into_inner()).iter().copied().collect()
    }

    /// Fetches a logical page: identity check, TDE flag, checksum.
    pub fn fetch(&self, pageid: i64) -> Fetch<'_> {
        if pageid < 0 {
            return Fetch::Absent(Absent::NoVolume);
        }
        if pageid < self.watch.below.load(Ordering::Relaxed) {
            self.watch.pages.lock().unwrap_or_else(|e| e.into_inner()).insert(pageid);
        }
        let nxarv = self.nxarv_pageid();
        let (vol, physical, bytes) = if let Some(a) = self.archive_for(pageid) {
            let physical = pageid - a.fpageid + 1;
            match self.page_bytes(a.vol, physical) {
                Ok(Some(b)) => (a.vol, physical, b),
                Ok(None) => return Fetch::Absent(Absent::Overwritten { vol: a.vol, found: -1 }),
                Err(e) => return Fetch::Failed(Box::new(e)),
            }
        } else if let Some(act) = &self.active {
            let slot = self.ring_slot(pageid).unwrap();
            match self.page_bytes(act.vol, slot) {
                Ok(Some(b)) => (act.vol, slot, b),
                Ok(None) => return Fetch::Absent(Absent::Overwritten { vol: act.vol, found: -1 }),
                Err(e) => return Fetch::Failed(Box::new(e)),
            }
        } else {
            return Fetch::Absent(Absent::NoVolume);
        };
        let header = PageHeader::parse(bytes);
        if header.logical_pageid != pageid {
            let found = header.logical_pageid;
            if self.is_damaged(pageid, physical, bytes) {
                let zeroed = bytes[..crate::format::page::PAGE_HEADER_SIZE].iter().all(|&b| b == 0);
                return Fetch::Absent(Absent::Damaged { vol, physical, found, zeroed });
            }
            if pageid < nxarv && self.archive_for(pageid).is_none() {
                return Fetch::Absent(Absent::ArchiveMissing);
            }
            return Fetch::Absent(Absent::Overwritten { vol, found });
        }
        let page = Page { bytes, header, vol, archived: pageid < nxarv };
        if header.is_encrypted() {
            return Fetch::Encrypted(page);
        }
        let volume = &self.volumes[vol];
        if !volume.is_verified(physical as usize) {
            let computed = page::compute_checksum(bytes);
            if computed != header.checksum {
                return Fetch::BadChecksum { page, computed };
            }
            volume.set_verified(physical as usize);
        }
        Fetch::Ok(page)
    }

    /// Whether the page at `physical` cannot be what a writer left where logical page `pageid`
    /// belongs: an archive holds exactly its pages; a ring slot holds `pageid` or a page of
    /// another cycle of the same slot, and below the header's append position it must hold one
    /// (never a zeroed page).
    fn is_damaged(&self, pageid: i64, physical: i64, bytes: &[u8]) -> bool {
        let found = PageHeader::parse(bytes).logical_pageid;
        let zeroed = bytes[..crate::format::page::PAGE_HEADER_SIZE].iter().all(|&b| b == 0) && pageid != 0;
        if self.archive_for(pageid).is_some() {
            return zeroed || found >= 0;
        }
        let must_exist = self.header().is_some_and(|h| pageid <= h.append_lsa.pageid);
        must_exist && (zeroed || (found >= 0 && self.ring_slot(found) != Some(physical)))
    }

    /// Fetches a page that must be present and readable; every other outcome is an error
    /// naming the page and `lsa` (the address being read).
    pub fn page(&self, pageid: i64, lsa: Lsa) -> Result<Page<'_>> {
        PageSource::page(self, pageid, lsa)
    }

    /// Turns a failed fetch into the error a caller reports.
    pub fn fetch_error(&self, f: Fetch<'_>, pageid: i64, lsa: Lsa) -> LogError {
        match f {
            Fetch::Ok(_) => LogError::InvalidArgument { msg: "internal: fetch succeeded".into() },
            Fetch::Failed(e) => e.at(lsa, pageid),
            Fetch::Encrypted(p) => LogError::Encrypted { file: self.volumes[p.vol].label().to_string(), lsa: Some(lsa), pageid },
            Fetch::BadChecksum { page, computed } => LogError::Checksum {
                file: self.volumes[page.vol].label().to_string(),
                lsa: Some(lsa),
                pageid,
                stored: page.header.checksum,
                computed,
            },
            Fetch::Absent(Absent::ArchiveMissing) => LogError::MissingArchive {
                file: self.set_name(),
                lsa: Some(lsa),
                msg: format!("log page {pageid} was archived, and no archive in the set holds it (the active ring reused its slot)"),
            },
            Fetch::Absent(Absent::Overwritten { vol, found }) => LogError::CorruptRecord {
                file: self.volumes[vol].label().to_string(),
                lsa: Some(lsa),
                msg: format!("log page {pageid} is not in the set (its slot holds page {found})"),
            },
            Fetch::Absent(Absent::Damaged { vol, physical, found, zeroed }) => LogError::CorruptRecord {
                file: self.volumes[vol].label().to_string(),
                lsa: Some(lsa),
                msg: if zeroed {
                    format!("log page {pageid} is damaged: page {physical} of the volume is zeroed")
                } else {
                    format!("log page {pageid} is damaged: page {physical} of the volume says it is log page {found}")
                },
            },
            Fetch::Absent(Absent::NoVolume) => LogError::Truncated {
                file: self.set_name(),
                lsa: Some(lsa),
                msg: format!("log page {pageid} lies beyond the volumes of the set"),
            },
        }
    }

    fn compute_first_pageid(&self) -> Result<i64> {
        if let Some(a) = self.archives.first() {
            return Ok(a.fpageid);
        }
        let Some(act) = &self.active else { return Ok(0) };
        let h = &act.header;
        let n = h.npages as i64;
        let hi = h.nxarv_pageid.max(h.append_lsa.pageid).max(0);
        let mut lo = (hi - n + 1).max(0);
        let mut top = h.nxarv_pageid.max(lo);
        if !self.ring_holds(top)? {
            return Ok(top);
        }
        // The pages of the window still in the ring are a suffix of it (older slots were reused).
        while lo < top {
            let mid = lo + (top - lo) / 2;
            if self.ring_holds(mid)? {
                top = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(top)
    }
}

fn volumes_name(v: &[Volume], i: usize) -> String {
    v[i].label().to_string()
}

fn check_header_page(vol: &Volume, ph: &PageHeader) -> Result<()> {
    if ph.logical_pageid != HEADER_PAGE_ID || ph.offset != -1 {
        return Err(LogError::BadHeader {
            file: vol.label().to_string(),
            msg: format!(
                "header page has logical page id {} and offset {} (expected -9 and -1)",
                ph.logical_pageid, ph.offset
            ),
        });
    }
    Ok(())
}

/// The header of an active volume, checked: page size, header checksum, size, and positions
/// that archiving and the ring never run ahead of.
fn checked_active_header(vol: &Volume, ph: &PageHeader) -> Result<ActiveHeader> {
    let b = vol.bytes();
    let body = &b[PAGE_HEADER_SIZE..];
    check_header_page(vol, ph)?;
    let h = ActiveHeader::parse(&body[..ACTIVE_HEADER_SIZE]);
    let ps = h.db_logpagesize as i64 as usize;
    if !VALID_PAGE_SIZES.contains(&ps) {
        return Err(LogError::BadHeader {
            file: vol.label().to_string(),
            msg: format!("log page size {} is not 4096, 8192 or 16384", h.db_logpagesize),
        });
    }
    if !page::checksum_ok(&b[..ps.min(b.len())]) || b.len() < ps {
        let computed = page::compute_checksum(&b[..ps.min(b.len()) / 4096 * 4096]);
        return Err(LogError::Checksum {
            file: vol.label().to_string(),
            lsa: None,
            pageid: HEADER_PAGE_ID,
            stored: ph.checksum,
            computed,
        });
    }
    if h.npages <= 0 {
        return Err(LogError::BadHeader {
            file: vol.label().to_string(),
            msg: format!("active log npages = {}", h.npages),
        });
    }
    let want = (h.npages as u64 + 1) * ps as u64;
    if (vol.len() as u64) < want {
        return Err(LogError::Truncated {
            file: vol.label().to_string(),
            lsa: None,
            msg: format!(
                "active volume is {} bytes, its header says {} pages of {} bytes ({} bytes)",
                vol.len(),
                h.npages as i64 + 1,
                ps,
                want
            ),
        });
    }
    // Archiving and the ring never run ahead of the append position the header had.
    let append_page = h.append_lsa.pageid;
    if h.append_lsa.is_null() || h.nxarv_pageid > append_page + 1 || h.fpageid > append_page + 1 {
        return Err(LogError::BadHeader {
            file: vol.label().to_string(),
            msg: format!(
                "implausible header: append at {}, next page to archive {}, ring starts at page {}",
                h.append_lsa, h.nxarv_pageid, h.fpageid
            ),
        });
    }
    Ok(h)
}

/// The header of an archive, checked against itself and the number its file name gives.
fn checked_archive_header(
    vol: &Volume,
    ph: &PageHeader,
    idx: usize,
    by_name: NameRole,
) -> Result<(Archive, Option<i64>)> {
    let body = &vol.bytes()[PAGE_HEADER_SIZE..];
    check_header_page(vol, ph)?;
    let a = Archive {
        vol: idx,
        db_creation: i64_at(body, 32),
        next_trid: i32_at(body, 40),
        npages: i32_at(body, 44) as i64,
        fpageid: i64_at(body, 48),
        num: i32_at(body, 56) as i64,
    };
    if a.npages <= 0 || a.fpageid < 0 {
        return Err(LogError::BadHeader {
            file: vol.label().to_string(),
            msg: format!("archive header has npages {} and first page {}", a.npages, a.fpageid),
        });
    }
    let name_num = match by_name {
        NameRole::Archive(n) => Some(n),
        _ => None,
    };
    if let Some(n) = name_num {
        if n != a.num {
            return Err(LogError::BadHeader {
                file: vol.label().to_string(),
                msg: format!("file name says archive {n}, its header says archive {}", a.num),
            });
        }
    }
    Ok((a, name_num))
}

/// An archive against the set: its database, its header page's checksum, its size.
fn check_archive(vol: &Volume, a: &Archive, db_creation: i64, page_size: usize) -> Result<()> {
    if a.db_creation != db_creation {
        return Err(LogError::Mismatch {
            file: vol.label().to_string(),
            msg: format!(
                "belongs to another database: db_creation {} differs from the set's {}",
                a.db_creation, db_creation
            ),
        });
    }
    if !page::checksum_ok(&vol.bytes()[..page_size.min(vol.len()) / 4096 * 4096]) {
        return Err(LogError::Checksum {
            file: vol.label().to_string(),
            lsa: None,
            pageid: HEADER_PAGE_ID,
            stored: PageHeader::parse(vol.bytes()).checksum,
            computed: page::compute_checksum(&vol.bytes()[..page_size.min(vol.len()) / 4096 * 4096]),
        });
    }
    let want = (a.npages as u64 + 1) * page_size as u64;
    if (vol.len() as u64) < want {
        return Err(LogError::Truncated {
            file: vol.label().to_string(),
            lsa: Some(Lsa::new(a.fpageid, 0)),
            msg: format!(
                "archive is {} bytes, its header says {} pages of {} bytes ({} bytes)",
                vol.len(),
                a.npages + 1,
                page_size,
                want
            ),
        });
    }
    Ok(())
}

/// Archives sorted by number: no number twice, none missing between two, page ranges
/// contiguous.
fn check_archive_sequence(volumes: &[Volume], archives: &[Archive]) -> Result<()> {
    for w in archives.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if a.num == b.num {
            return Err(LogError::Mismatch {
                file: volumes[b.vol].label().to_string(),
                msg: format!("archive number {} appears twice (also {})", b.num, volumes[a.vol].name),
            });
        }
        if b.num != a.num + 1 {
            return Err(LogError::MissingArchive {
                file: volumes[b.vol].label().to_string(),
                lsa: Some(Lsa::new(a.last_pageid() + 1, 0)),
                msg: format!(
                    "archive(s) {}..{} between {} and {} are not in the set (pages from {} on)",
                    a.num + 1,
                    b.num - 1,
                    volumes[a.vol].name,
                    volumes[b.vol].name,
                    a.last_pageid() + 1
                ),
            });
        }
        if b.fpageid != a.last_pageid() + 1 {
            return Err(LogError::Mismatch {
                file: volumes[b.vol].label().to_string(),
                msg: format!(
                    "archive page ranges are not contiguous: {} ends at page {}, {} starts at page {}",
                    volumes[a.vol].name,
                    a.last_pageid(),
                    volumes[b.vol].name,
                    b.fpageid
                ),
            });
        }
    }
    Ok(())
}

/// The newest archive against the active header: not newer than what it archived, ending where
/// it says archiving stopped.
fn check_active_and_archives(volumes: &[Volume], active: &Option<Active>, archives: &[Archive]) -> Result<()> {
    if let (Some(act), Some(last)) = (&active, archives.last()) {
        let h = &act.header;
        if last.num >= h.nxarv_num as i64 {
            return Err(LogError::Mismatch {
                file: volumes[last.vol].label().to_string(),
                msg: format!(
                    "archive {} is newer than the active volume, which has archived only up to archive {}",
                    last.num,
                    h.nxarv_num - 1
                ),
            });
        }
        if last.num == h.nxarv_num as i64 - 1 && last.last_pageid() + 1 != h.nxarv_pageid {
            return Err(LogError::Mismatch {
                file: volumes[last.vol].label().to_string(),
                msg: format!(
                    "last archive ends at page {}, the active header says archiving stopped before page {}",
                    last.last_pageid(),
                    h.nxarv_pageid
                ),
            });
        }
    }
    Ok(())
}

/// Archives carry no page size: find the one at which physical page 1 holds `fpageid`.
fn infer_archive_page_size(volumes: &[Volume], archives: &[Archive]) -> Result<usize> {
    let a = &archives[0];
    let vol = &volumes[a.vol];
    // A truncated archive still shows its page size: physical page 1 holds `fpageid`. Its
    // missing tail is reported by the length check that follows.
    for ps in VALID_PAGE_SIZES {
        if vol.len() < 2 * ps {
            continue;
        }
        let p1 = PageHeader::parse(&vol.bytes()[ps..]);
        if p1.logical_pageid == a.fpageid {
            return Ok(ps);
        }
    }
    if vol.len() < 2 * VALID_PAGE_SIZES[0] {
        return Err(LogError::Truncated {
            file: vol.label().to_string(),
            lsa: None,
            msg: format!("archive of {} bytes holds no log page", vol.len()),
        });
    }
    Err(LogError::BadHeader {
        file: vol.label().to_string(),
        msg: format!(
            "cannot infer the log page size: no page size in 4K/8K/16K puts page {} at physical page 1",
            a.fpageid
        ),
    })
}

/// The memory-mapped volumes are a page source.
impl PageSource for LogSet {
    fn page_size(&self) -> usize {
        self.page_size
    }

    fn fetch(&self, pageid: i64) -> Fetch<'_> {
        LogSet::fetch(self, pageid)
    }

    fn fetch_error(&self, f: Fetch<'_>, pageid: i64, lsa: Lsa) -> LogError {
        LogSet::fetch_error(self, f, pageid, lsa)
    }

    fn volume_name(&self, vol: usize) -> &str {
        LogSet::volume_name(self, vol)
    }

    fn total_bytes(&self) -> u64 {
        LogSet::total_bytes(self)
    }
}

/// The memory-mapped volumes are a log source.
impl LogSource for LogSet {
    fn db_creation(&self) -> i64 {
        self.db_creation
    }

    fn first_pageid(&self) -> i64 {
        self.first_pageid
    }

    fn header(&self) -> Option<&ActiveHeader> {
        LogSet::header(self)
    }

    fn active_volume(&self) -> Option<usize> {
        self.active.as_ref().map(|a| a.vol)
    }

    fn nxarv_pageid(&self) -> i64 {
        LogSet::nxarv_pageid(self)
    }

    fn set_name(&self) -> String {
        LogSet::set_name(self)
    }

    fn volume_count(&self) -> usize {
        self.volumes.len()
    }

    fn volume_file(&self, vol: usize) -> &str {
        &self.volumes[vol].name
    }

    fn is_remote(&self) -> bool {
        LogSet::is_remote(self)
    }

    fn release_pages(&self, from: i64, to: i64) {
        LogSet::release_pages(self, from, to)
    }

    fn prefetch_pages(&self, from: i64, to: i64) {
        LogSet::prefetch_pages(self, from, to)
    }

    fn count_random_read(&self) {
        LogSet::count_random_read(self)
    }

    fn random_reads(&self) -> u64 {
        LogSet::random_reads(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pages_the_cache_lacks_are_read_ahead() {
        assert_eq!(missing_runs(&[1, 1, 1], 2), vec![]);
        assert_eq!(missing_runs(&[0, 0, 0], 2), vec![(0, 3)]);
        assert_eq!(missing_runs(&[1, 0, 1, 1, 0, 1, 1, 1, 0, 1], 2), vec![(1, 5), (8, 9)]);
        assert_eq!(missing_runs(&[0, 1, 1, 1, 0], 3), vec![(0, 5)]);
    }

    #[test]
    fn volume_names() {
        assert_eq!(name_role("p4k_lgat"), NameRole::Active);
        assert_eq!(name_role("p4k_lgar000"), NameRole::Archive(0));
        assert_eq!(name_role("db_lgar1234"), NameRole::Archive(1234));
        assert_eq!(name_role("db_lgar_t"), NameRole::Other);
        assert_eq!(name_role("db_lgar.removed"), NameRole::Other);
        assert_eq!(name_role("db_lgar01"), NameRole::Other);
        assert_eq!(name_role("db_lginf"), NameRole::Other);
    }

    #[test]
    fn a_refreshed_set_keeps_its_archives_and_reopens_the_rest() {
        use crate::testkit::writer::{DataFields, LogWriter, WriterConfig};
        let cfg = WriterConfig { page_size: 4096, active_pages: 16, archive_pages: 8, ..WriterConfig::default() };
        let mut w = LogWriter::new(cfg).unwrap();
        for i in 0..1200usize {
            let fields = DataFields { rcvindex: 1, ..DataFields::default() };
            let body = vec![i as u8; 200];
            w.append(1, crate::format::rectype::LOG_REDO_DATA, &fields, &[], &body, false, false).unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        w.finish(dir.path()).unwrap();
        let log = Arc::new(LogSet::open(&[dir.path()]).unwrap());
        assert!(log.archives.len() >= 2, "{} archives", log.archives.len());
        let again = Arc::new(log.refreshed(&[dir.path().to_path_buf()]).unwrap());
        assert_eq!(again.archives.len(), log.archives.len());
        for (a, b) in log.archives.iter().zip(&again.archives) {
            assert!(log.shares_volume(&again, a.vol, b.vol), "archive {} reopened", a.num);
        }
        let (act, act2) = (log.active.as_ref().unwrap().vol, again.active.as_ref().unwrap().vol);
        assert!(!log.shares_volume(&again, act, act2), "the active volume is read again");
        // The same records, read through either set.
        let walk = |set: &Arc<LogSet>| {
            let on = crate::log::walker::OnEncrypted::Raise;
            let mut w = crate::log::walker::Walker::new(set.clone(), None, None, on).unwrap();
            let mut n = 0;
            while w.next_record().unwrap().is_some() {
                n += 1;
            }
            n
        };
        assert_eq!(walk(&log), walk(&again));
    }

    #[test]
    fn ring_mapping_is_modular() {
        assert_eq!(floor_mod(-3, 10), 7);
        assert_eq!(floor_mod(13, 10), 3);
    }
}
