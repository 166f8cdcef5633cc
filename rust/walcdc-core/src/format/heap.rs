//! Heap layout facts shared by the chase, the catalog, the row decoder and the encoders: slot
//! record types, the MVCC record header, overflow pages.

use crate::format::le::{i16_at, i32_at};

/// Slot record types (`REC_*`): what a heap slot holds.
pub const REC_UNKNOWN: i16 = 0;
pub const REC_ASSIGN_ADDRESS: i16 = 1;
pub const REC_HOME: i16 = 2;
pub const REC_NEWHOME: i16 = 3;
pub const REC_RELOCATION: i16 = 4;
pub const REC_BIGONE: i16 = 5;

/// MVCC flags in the top byte of a record's first word (big-endian): which optional header
/// fields follow the 8 fixed bytes.
pub const MVCC_FLAG_INSID: u8 = 0x01;
pub const MVCC_FLAG_DELID: u8 = 0x02;
pub const MVCC_FLAG_PREV_VERSION: u8 = 0x04;
/// All MVCC flag bits of word 0.
pub const MVCC_FLAGS_MASK: u32 = 0x1F;

/// The MVCC flags of a record's first word.
pub fn mvcc_flags(word0: u32) -> u8 {
    ((word0 >> 24) & MVCC_FLAGS_MASK) as u8
}

/// The record header size by the three optional-field flags (8 fixed bytes, 8 per field).
pub const fn header_size(flags: u8) -> usize {
    8 + 8
        * ((flags & MVCC_FLAG_INSID != 0) as usize
            + (flags & MVCC_FLAG_DELID != 0) as usize
            + (flags & MVCC_FLAG_PREV_VERSION != 0) as usize)
}

/// An overflow page starts with the next page's VPID (pageid i32, volid i16, padding); the
/// first page of a record then holds the record's length (i32).
pub const OVERFLOW_HEADER: usize = 8;
pub const OVERFLOW_FIRST_HEADER: usize = 12;

/// The next page of an overflow chain, `(volid, pageid)`; `None` at the end of the chain or
/// for a page too short to say.
pub fn overflow_next(page: &[u8]) -> Option<(i16, i32)> {
    if page.len() < 6 {
        return None;
    }
    let pageid = i32_at(page, 0);
    (pageid >= 0).then(|| (i16_at(page, 4), pageid))
}

/// The record length a first overflow page gives, `None` if the page is too short.
pub fn overflow_length(first: &[u8]) -> Option<i32> {
    (first.len() >= OVERFLOW_FIRST_HEADER).then(|| i32_at(first, 8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_sizes() {
        let sizes: Vec<usize> = (0..8).map(header_size).collect();
        assert_eq!(sizes, [8, 16, 16, 24, 16, 24, 24, 32]);
        assert_eq!(mvcc_flags(0x4300_0001), 3);
    }

    #[test]
    fn json_strings_escape_as_serde_json() {
        let mut rng = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..2000 {
            let n = rng.below(12) as usize;
            let s: String = (0..n)
                .map(|_| match rng.below(4) {
                    0 => char::from_u32(rng.below(0x80) as u32).unwrap(),
                    1 => ['"', '\\', '\u{8}', '\u{c}', '\n', '\u{1f}'][rng.below(6) as usize],
                    2 => char::from_u32(0x80 + rng.below(0x700) as u32).unwrap_or('x'),
                    _ => '😀',
                })
                .collect();
            let mut ours = String::new();
            crate::format::row::text::push_json_str(&mut ours, &s);
            assert_eq!(ours, serde_json::to_string(&s).unwrap(), "{s:?}");
        }
    }
}
