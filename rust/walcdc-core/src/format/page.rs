//! Log pages: the 16-byte page header, the sampled CRC-32 checksum, TDE flags, 0xFF blocks.

/// `sizeof(LOG_HDRPAGE)`.
pub const PAGE_HEADER_SIZE: usize = 16;
/// Logical page id of header pages (`LOGPB_HEADER_PAGE_ID`).
pub const HEADER_PAGE_ID: i64 = -9;
/// TDE algorithm bits in `LOG_HDRPAGE.flags` (AES 0x1, ARIA 0x2).
pub const FLAG_ENCRYPTED_MASK: i16 = 0x3;

const CHECKSUM_BLOCK: usize = 4096;
const CHECKSUM_SAMPLE: usize = 16;

/// `LOG_HDRPAGE`: the plaintext header at the start of every log page.
// `repr(C)`: the fields in the page's order, so that parsing is one 16-byte copy on a
// little-endian machine (field-by-field stores then read back whole stalled every fetch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct PageHeader {
    pub logical_pageid: i64,
    /// Area offset of the first record that starts in this page, or -1.
    pub offset: i16,
    pub flags: i16,
    pub checksum: u32,
}

impl PageHeader {
    /// Parses the first 16 bytes of a page. `page` must hold at least 16 bytes.
    #[inline]
    pub fn parse(page: &[u8]) -> PageHeader {
        let raw: &[u8; 16] = page[..16].try_into().expect("16 bytes");
        let v = u128::from_le_bytes(*raw);
        PageHeader {
            logical_pageid: v as u64 as i64,
            offset: (v >> 64) as u16 as i16,
            flags: (v >> 80) as u16 as i16,
            checksum: (v >> 96) as u32,
        }
    }

    pub fn is_encrypted(&self) -> bool {
        self.flags & FLAG_ENCRYPTED_MASK != 0
    }
}

/// CUBRID's page checksum: CRC-32 (zlib/IEEE) over the first and last 16 bytes of every
/// 4096-byte block of the page, with the checksum field itself read as zero.
pub fn compute_checksum(page: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for block in page.chunks_exact(CHECKSUM_BLOCK) {
        let head = &block[..CHECKSUM_SAMPLE];
        if std::ptr::eq(block.as_ptr(), page.as_ptr()) {
            h.update(&head[..12]);
            h.update(&[0u8; 4]);
        } else {
            h.update(head);
        }
        h.update(&block[CHECKSUM_BLOCK - CHECKSUM_SAMPLE..]);
    }
    h.finalize()
}

/// Writes the checksum into a page (used by the log writer).
pub fn set_checksum(page: &mut [u8]) {
    let c = compute_checksum(page);
    page[12..16].copy_from_slice(&c.to_le_bytes());
}

pub fn checksum_ok(page: &[u8]) -> bool {
    compute_checksum(page) == PageHeader::parse(page).checksum
}

/// True if the page reads as never written: the `fileio_format` pattern (page id -1, offset
/// -1) or all 0xFF.
pub fn is_never_written(page: &[u8]) -> bool {
    page[..14].iter().all(|&b| b == 0xFF)
}

/// The area offset of the first 4096-byte block of the page that is entirely 0xFF
/// (the engine's "null block" test), if any.
pub fn first_null_block_offset(page: &[u8]) -> Option<usize> {
    page.chunks_exact(CHECKSUM_BLOCK)
        .position(|b| b.iter().all(|&x| x == 0xFF))
        .map(|i| (i * CHECKSUM_BLOCK).saturating_sub(PAGE_HEADER_SIZE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_are_read_in_the_pages_order() {
        let mut page = [0u8; 24];
        page[..8].copy_from_slice(&(-2i64).to_le_bytes());
        page[8..10].copy_from_slice(&(-1i16).to_le_bytes());
        page[10..12].copy_from_slice(&0x0102i16.to_le_bytes());
        page[12..16].copy_from_slice(&0xDEAD_BEEFu32.to_le_bytes());
        page[16..].fill(0xFF); // past the header: never read
        let h = PageHeader::parse(&page);
        assert_eq!(h, PageHeader { logical_pageid: -2, offset: -1, flags: 0x0102, checksum: 0xDEAD_BEEF });
        let p = PageHeader::parse(&[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x08, 9, 0, 0, 0x80, 1, 0, 0, 0]);
        assert_eq!(p.logical_pageid, 0x0877_6655_4433_2211);
        assert_eq!((p.offset, p.flags, p.checksum), (9, i16::MIN, 1));
    }

    #[test]
    fn checksum_ignores_its_own_field_and_unsampled_bytes() {
        let mut page = vec![0xABu8; 8192];
        set_checksum(&mut page);
        assert!(checksum_ok(&page));
        page[100] ^= 1; // not sampled
        assert!(checksum_ok(&page));
        page[4096 + 3] ^= 1; // sampled (head of block 1)
        assert!(!checksum_ok(&page));
    }

    #[test]
    fn plain_crc32_of_the_samples() {
        let mut page = vec![0u8; 4096];
        for (i, b) in page.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let mut samples = Vec::new();
        samples.extend_from_slice(&page[..12]);
        samples.extend_from_slice(&[0, 0, 0, 0]);
        samples.extend_from_slice(&page[4080..]);
        assert_eq!(compute_checksum(&page), crc32fast::hash(&samples));
    }
}
