//! Reading a forward walk's pages ahead of it, on a thread of its own, so that reading a log
//! larger than the page cache from disk overlaps decoding instead of stalling the walk on each
//! page fault.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::log::source::LogSource;

/// Pages asked for in one call: small enough that the walk soon finds the first ones read.
const CHUNK_BYTES: i64 = 4 << 20;
/// Pages asked for in one call from object storage: several blocks fetched at once.
const REMOTE_CHUNK_BYTES: i64 = 64 << 20;

struct Wanted {
    /// Pages below this one are wanted.
    below: AtomicI64,
    /// The page the walk was at when it last asked: pages before it are not read (a thread
    /// fallen behind would map pages the walk has released, and nothing would release them).
    walk_at: AtomicI64,
    stop: AtomicBool,
}

/// A thread that asks the system to read pages ahead of a walk (`LogSource::prefetch_pages`);
/// stopped when dropped.
pub(crate) struct ReadAhead {
    wanted: Arc<Wanted>,
    thread: Option<JoinHandle<()>>,
}

impl ReadAhead {
    /// Starts reading ahead from page `from`; `None` if no thread can be started (the walk
    /// goes on without).
    pub(crate) fn start<S: LogSource + ?Sized + 'static>(log: Arc<S>, from: i64) -> Option<ReadAhead> {
        let wanted = Arc::new(Wanted {
            below: AtomicI64::new(from),
            walk_at: AtomicI64::new(from),
            stop: AtomicBool::new(false),
        });
        let mine = wanted.clone();
        // From object storage, a chunk is fetched as several blocks at once.
        let bytes = if log.is_remote() { REMOTE_CHUNK_BYTES } else { CHUNK_BYTES };
        let chunk = (bytes / log.page_size().max(1) as i64).max(1);
        let thread = std::thread::Builder::new()
            .name("walcdc-readahead".into())
            .spawn(move || {
                let mut done = from;
                while !mine.stop.load(Ordering::Acquire) {
                    let below = mine.below.load(Ordering::Acquire);
                    if below <= done {
                        std::thread::park();
                        continue;
                    }
                    done = done.max(mine.walk_at.load(Ordering::Acquire));
                    if below <= done {
                        continue;
                    }
                    let to = below.min(done + chunk);
                    log.prefetch_pages(done, to);
                    done = to;
                }
            })
            .ok()?;
        Some(ReadAhead { wanted, thread: Some(thread) })
    }

    /// Pages below `below` are wanted; the walk is at page `at`.
    pub(crate) fn want(&self, at: i64, below: i64) {
        self.wanted.walk_at.fetch_max(at, Ordering::AcqRel);
        if self.wanted.below.fetch_max(below, Ordering::AcqRel) < below {
            if let Some(t) = &self.thread {
                t.thread().unpark();
            }
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.wanted.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
