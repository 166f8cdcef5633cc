//! Where pages come from. The record and payload decoders read pages through [`PageSource`];
//! the memory-mapped [`LogSet`](crate::LogSet) is one source, a live follower's buffer or a
//! test's pages in memory are others.

use crate::error::LogError;
use crate::logset::{Fetch, Page};
use crate::lsa::Lsa;
use crate::page::PAGE_HEADER_SIZE;

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
