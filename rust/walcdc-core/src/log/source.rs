//! Where pages come from. The record and payload decoders read pages through [`PageSource`];
//! the walker and the change readers read a whole log through [`LogSource`] (its pages and what
//! its header says). The memory-mapped [`LogSet`](crate::log::logset::LogSet) is one source, a
//! live follower's growing pages or a test's pages in memory are others.

use crate::error::LogError;
use crate::format::log_header::ActiveHeader;
use crate::format::lsa::Lsa;
use crate::format::page::PageHeader;
use crate::format::page::PAGE_HEADER_SIZE;

/// A source of logical log pages.
pub trait PageSource {
    /// Page size in bytes (header included).
    fn page_size(&self) -> usize;

    /// A logical page, checked: identity (the page says it is `pageid`), TDE flag, checksum.
    fn fetch(&self, pageid: i64) -> Fetch<'_>;

    /// The error a failed fetch means for a reader at `lsa`.
    fn fetch_error(&self, f: Fetch<'_>, pageid: i64, lsa: Lsa) -> LogError;

    /// The name of volume `vol`, for messages.
    fn volume_name(&self, vol: usize) -> &str;

    /// An upper bound for any length field (the bytes the source holds): a longer payload is
    /// a lie, refused before a page is touched.
    fn total_bytes(&self) -> u64;

    /// Bytes of a page after its header.
    fn area_size(&self) -> usize {
        self.page_size() - PAGE_HEADER_SIZE
    }

    /// A page that must be there, or the error its absence means.
    fn page(&self, pageid: i64, lsa: Lsa) -> Result<Page<'_>, LogError> {
        match self.fetch(pageid) {
            Fetch::Ok(p) => Ok(p),
            other => Err(self.fetch_error(other, pageid, lsa)),
        }
    }
}

/// A whole log as readers walk it: its pages, and what its active header says of them. The
/// pages a source holds may grow (a server still writing): a walk that ended at the live tail
/// goes on over the same source (see `Walker::resume_on`).
pub trait LogSource: PageSource + Send + Sync {
    /// `db_creation` of the database the log belongs to.
    fn db_creation(&self) -> i64;

    /// The first logical page the source holds.
    fn first_pageid(&self) -> i64;

    /// The active volume's header, if the source has one.
    fn header(&self) -> Option<&ActiveHeader>;

    /// The volume index of the active volume, if the source has one.
    fn active_volume(&self) -> Option<usize>;

    /// The first page not archived (`nxarv_pageid`), or, without an active volume, the page
    /// after the last archive.
    fn nxarv_pageid(&self) -> i64;

    /// What messages call the log as a whole.
    fn set_name(&self) -> String;

    /// How many volumes the source has (volume indexes are `0..volume_count()`).
    fn volume_count(&self) -> usize;

    /// The file name of volume `vol` (without its directory or URL), for volume ids that stay
    /// the same across snapshots of a followed log.
    fn volume_file(&self, vol: usize) -> &str {
        self.volume_name(vol)
    }

    /// Pages are fetched from far away (each block waited for costs a request's latency).
    fn is_remote(&self) -> bool {
        false
    }

    /// The pages `[from, to)` will not be read soon (a forward walk has passed them).
    fn release_pages(&self, _from: i64, _to: i64) {}

    /// The pages `[from, to)` will be read soon (a read-ahead thread calls it).
    fn prefetch_pages(&self, _from: i64, _to: i64) {}

    /// Counts one record read by random access (a measure of the work chases do).
    fn count_random_read(&self) {}

    /// Records read by random access so far (0 if the source does not count them).
    fn random_reads(&self) -> u64 {
        0
    }
}

/// A fetched page: the page's bytes (borrowed from the mapping) and where they came from.
#[derive(Clone, Copy)]
pub struct Page<'a> {
    pub bytes: &'a [u8],
    pub header: PageHeader,
    pub vol: usize,
    /// The page lies below the active header's `nxarv_pageid`: it has been archived, and the
    /// end-of-log rules do not apply to it.
    pub archived: bool,
}

/// Why a logical page is not available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Absent {
    /// Archived (below `nxarv_pageid`), no archive of the set holds it, and the ring slot was
    /// reused.
    ArchiveMissing,
    /// The ring slot (or the archive page) holds another logical page (or was never written).
    Overwritten { vol: usize, found: i64 },
    /// No volume could hold it (beyond the archives given, and no active volume).
    NoVolume,
    /// The place that must hold the page holds something no writer put there (a zeroed page,
    /// or a page id that does not belong in that archive or ring slot).
    Damaged { vol: usize, physical: i64, found: i64, zeroed: bool },
}

/// The outcome of fetching one logical page.
pub enum Fetch<'a> {
    Ok(Page<'a>),
    /// TDE-encrypted: the page header is readable, the area is not.
    Encrypted(Page<'a>),
    BadChecksum {
        page: Page<'a>,
        computed: u32,
    },
    Absent(Absent),
    /// The page could not be read from where it lives (object storage: a request failed after
    /// its retries, the object is gone or shorter than listed). Never the end of the log.
    Failed(Box<LogError>),
}
