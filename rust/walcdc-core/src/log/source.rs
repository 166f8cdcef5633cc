//! Where pages come from. The record and payload decoders read pages through [`PageSource`];
//! the memory-mapped [`LogSet`](crate::log::logset::LogSet) is one source, a live follower's buffer or a
//! test's pages in memory are others.

use crate::error::LogError;
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
