//! Payload bytes: borrowed from the mapping when they lie in one page, gathered across pages
//! otherwise; LZ4 unzip (`[u32 original length][raw LZ4 block]`) and DIFF redo reconstruction.

use crate::error::{LogError, Result};
use crate::format::le;
use crate::format::page::PAGE_HEADER_SIZE;
use crate::format::rectype::is_diff;
use crate::log::record::{Payload, Record};
use crate::log::source::PageSource;

/// LZ4 cannot expand data by more than this factor; a larger "original length" is a lie.
const LZ4_MAX_RATIO: u64 = 255;
/// The largest unzipped payload accepted.
const MAX_PAYLOAD: u64 = 1 << 30;

/// The stored bytes of a payload. Borrowed from the mapping when they lie in one page;
/// gathered into `scratch` (reused by the caller) when they span pages.
pub fn stored_bytes<'s, S: PageSource + ?Sized>(src: &'s S, p: &Payload, scratch: &'s mut Vec<u8>) -> Result<&'s [u8]> {
    let area = src.area_size();
    let len = p.stored_len as usize;
    if len == 0 {
        return Ok(&[]);
    }
    let off = p.start.offset as usize;
    if off + len <= area {
        let page = src.page(p.start.pageid, p.record)?;
        let s = PAGE_HEADER_SIZE + off;
        return Ok(&page.bytes[s..s + len]);
    }
    scratch.clear();
    scratch.reserve(len);
    let (mut pageid, mut off, mut left) = (p.start.pageid, off, len);
    while left > 0 {
        if off == area {
            pageid += 1;
            off = 0;
        }
        let page = src.page(pageid, p.record)?;
        let k = left.min(area - off);
        scratch.extend_from_slice(&page.bytes[PAGE_HEADER_SIZE + off..PAGE_HEADER_SIZE + off + k]);
        off += k;
        left -= k;
    }
    Ok(&scratch[..])
}

/// The original (uncompressed) length of a payload: its zip prefix, or its stored length.
pub fn original_len<S: PageSource + ?Sized>(src: &S, p: &Payload) -> Result<u32> {
    if !p.zipped {
        return Ok(p.stored_len);
    }
    if p.stored_len < 4 {
        return Err(payload_error(src, p, format!("zipped payload of {} bytes has no length prefix", p.stored_len)));
    }
    let orig = match p.prefix {
        Some(orig) => orig,
        None => {
            let mut scratch = Vec::new();
            let head = Payload { stored_len: 4, zipped: false, prefix: None, ..*p };
            le::u32_at(stored_bytes(src, &head, &mut scratch)?, 0)
        }
    };
    check_zip_prefix(orig as u64, p.stored_len as usize - 4).map_err(|m| payload_error(src, p, m))?;
    Ok(orig)
}

/// A corrupt payload, reported at its record and the record's volume.
fn payload_error<S: PageSource + ?Sized>(src: &S, p: &Payload, msg: String) -> LogError {
    LogError::corrupt(src.volume_name(p.record_vol as usize), p.record, format!("payload at {}: {msg}", p.start))
}

/// The payload as the engine meant it: unzipped if zipped. Written into `out`.
pub fn payload_into<S: PageSource + ?Sized>(
    src: &S,
    p: &Payload,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<()> {
    let bytes = stored_bytes(src, p, scratch)?;
    out.clear();
    if p.zipped {
        unzip_into(bytes, out).map_err(|m| payload_error(src, p, m))
    } else {
        out.extend_from_slice(bytes);
        Ok(())
    }
}

/// The undo and redo images of a record: unzipped, and for DIFF records the redo rebuilt by
/// XOR with the undo image.
pub fn images<S: PageSource + ?Sized>(src: &S, rec: &Record, undo: &mut Vec<u8>, redo: &mut Vec<u8>) -> Result<()> {
    let mut scratch = Vec::new();
    payload_into(src, &rec.undo, &mut scratch, undo)?;
    payload_into(src, &rec.redo, &mut scratch, redo)?;
    if is_diff(rec.rectype) && rec.redo.zipped {
        undo_diff(undo, redo);
    }
    Ok(())
}

/// The payload functions as methods: every [`PageSource`] has them.
pub trait ReadPayloads: PageSource {
    fn stored_bytes<'s>(&'s self, p: &Payload, scratch: &'s mut Vec<u8>) -> Result<&'s [u8]> {
        stored_bytes(self, p, scratch)
    }

    fn original_len(&self, p: &Payload) -> Result<u32> {
        original_len(self, p)
    }

    fn payload_into(&self, p: &Payload, scratch: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<()> {
        payload_into(self, p, scratch, out)
    }

    fn images(&self, rec: &Record, undo: &mut Vec<u8>, redo: &mut Vec<u8>) -> Result<()> {
        images(self, rec, undo, redo)
    }
}

impl<S: PageSource + ?Sized> ReadPayloads for S {}

/// Compression ratio up to which a zipped payload's length prefix is believed before its block
/// is decoded (rows compress 2-4× in the fixtures and the generated logs; a lie within it costs
/// at most this many times the block, as an honest payload of that ratio would).
const TRUSTED_RATIO: u64 = 16;
/// Bytes any prefix may claim beyond that ratio (a small block of a long run).
const TRUSTED_SLACK: u64 = 4096;

/// Decompresses a LOG_ZIP payload: `[i32 original length, LE][raw LZ4 block]`.
pub fn unzip_into(stored: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), String> {
    if stored.len() < 4 {
        return Err(format!("zipped payload of {} bytes has no length prefix", stored.len()));
    }
    let orig = le::u32_at(stored, 0) as u64;
    let block = &stored[4..];
    check_zip_prefix(orig, block.len())?;
    // A prefix claiming more than the engine's data ever compresses to is checked against the
    // block's sequence headers before anything is allocated: a prefix that lies costs no memory.
    // Below that ratio the block is decoded straight away (the decoder checks it as it goes), a
    // pass over every image spared.
    if orig > TRUSTED_RATIO * block.len() as u64 + TRUSTED_SLACK {
        let decoded = lz4_decoded_len(block, orig)?;
        if decoded != orig {
            return Err(format!("LZ4 block decodes to {decoded} bytes, its prefix says {orig}"));
        }
    }
    let start = out.len();
    out.resize(start + orig as usize, 0);
    match lz4_flex::block::decompress_into(block, &mut out[start..]) {
        Ok(n) if n as u64 == orig => Ok(()),
        Ok(n) => {
            out.truncate(start);
            Err(format!("LZ4 block decoded to {n} bytes, its prefix says {orig}"))
        }
        Err(e) => {
            out.truncate(start);
            Err(format!("LZ4 block does not decode: {e}"))
        }
    }
}

/// The number of bytes an LZ4 block decodes to, from its sequence headers alone (no output);
/// an error for a block that is not well formed or decodes to more than `limit` bytes.
fn lz4_decoded_len(block: &[u8], limit: u64) -> std::result::Result<u64, String> {
    let bad = |what: &str| Err(format!("LZ4 block is not well formed: {what}"));
    // A length field: 4 bits in the token, then bytes of 255 until one is smaller.
    fn extended(block: &[u8], i: &mut usize, mut n: u64) -> Option<u64> {
        if n == 15 {
            loop {
                let b = *block.get(*i)?;
                *i += 1;
                n += b as u64;
                if b != 255 {
                    break;
                }
            }
        }
        Some(n)
    }
    let (mut i, mut total) = (0usize, 0u64);
    loop {
        let Some(&token) = block.get(i) else { return bad("ends before a sequence") };
        i += 1;
        let Some(literals) = extended(block, &mut i, (token >> 4) as u64) else { return bad("literal length") };
        let Some(end) = usize::try_from(literals).ok().and_then(|l| i.checked_add(l)).filter(|&e| e <= block.len())
        else {
            return bad("literals run past the block");
        };
        i = end;
        total += literals;
        if i == block.len() {
            return Ok(total); // the last sequence has literals only
        }
        if i + 2 > block.len() {
            return bad("match offset cut off");
        }
        let offset = le::u16_at(block, i) as u64;
        i += 2;
        if offset == 0 || offset > total {
            return bad("match offset points before the start");
        }
        let Some(matched) = extended(block, &mut i, (token & 15) as u64) else { return bad("match length") };
        total += matched + 4;
        if total > limit {
            return Err(format!("LZ4 block decodes to more than its prefix's {limit} bytes"));
        }
    }
}

/// A zip prefix must announce a length an LZ4 block of this size can produce.
fn check_zip_prefix(orig: u64, block_len: usize) -> std::result::Result<(), String> {
    // No payload the engine writes comes near 1 GiB (rows and strings are capped below it).
    if orig == 0 || orig > (block_len as u64 + 1) * LZ4_MAX_RATIO || orig > MAX_PAYLOAD {
        return Err(format!("zipped payload claims {orig} bytes from a {block_len}-byte LZ4 block"));
    }
    Ok(())
}

/// DIFF reconstruction: `redo[i] ^= undo[i]` over the common length.
pub fn undo_diff(undo: &[u8], redo: &mut [u8]) {
    for (r, u) in redo.iter_mut().zip(undo) {
        *r ^= *u;
    }
}

/// Compresses like the engine's `log_zip`: prefix + LZ4 block. `None` when it would not be
/// smaller than the input (the engine then stores the raw bytes).
#[cfg(any(test, feature = "writer"))]
pub fn zip(data: &[u8]) -> Option<Vec<u8>> {
    let block = lz4_flex::block::compress(data);
    if 4 + block.len() >= data.len() {
        return None;
    }
    let mut out = Vec::with_capacity(4 + block.len());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&block);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zip_round_trip() {
        let data: Vec<u8> = b"lz4-tag-".iter().cycle().take(1000).copied().collect();
        let z = zip(&data).expect("compressible");
        let mut out = Vec::new();
        unzip_into(&z, &mut out).unwrap();
        assert_eq!(out, data);
    }

    #[test]
    fn decoded_length_is_known_before_decoding() {
        for data in
            [vec![0u8; 100_000], b"abcabcabcabcabcabcabc-xyz".repeat(50), (0..=255u8).cycle().take(70_000).collect()]
        {
            let z = zip(&data).expect("compressible");
            assert_eq!(lz4_decoded_len(&z[4..], u64::MAX), Ok(data.len() as u64));
        }
        // 1 GiB of zeros compresses to about 4 MiB; a prefix that says 1 GiB for a block that
        // holds 64 KiB is refused before the gigabyte is allocated.
        let z = zip(&vec![0u8; 64 << 10]).unwrap();
        let mut lying = (1u32 << 30).to_le_bytes().to_vec();
        lying.extend_from_slice(&z[4..]);
        lying.resize(lying.len() + (4 << 20), 0); // padding so the 255x rule lets it through
        let mut out = Vec::new();
        assert!(unzip_into(&lying, &mut out).is_err());
        assert!(out.capacity() < 1 << 20, "allocated {}", out.capacity());
    }

    #[test]
    fn lying_prefix_is_refused_without_allocating_it() {
        let mut bad = vec![0xFF, 0xFF, 0xFF, 0x7F];
        bad.extend_from_slice(&[0x10, b'a']);
        let mut out = Vec::new();
        assert!(unzip_into(&bad, &mut out).is_err());
        assert!(out.capacity() < 1 << 20);
    }

    /// A prefix within the ratio decoded straight away, one byte off either way, is refused
    /// too, and leaves what the buffer held before.
    #[test]
    fn a_prefix_off_by_a_little_is_refused() {
        let data: Vec<u8> = (0..400u32).flat_map(|i| format!("{},", i * i).into_bytes()).collect();
        let z = zip(&data).unwrap();
        let orig = data.len() as u32;
        assert!((orig as u64) < TRUSTED_RATIO * (z.len() as u64 - 4), "decoded without the pre-scan");
        for claim in [orig - 1, orig + 1] {
            let mut lying = claim.to_le_bytes().to_vec();
            lying.extend_from_slice(&z[4..]);
            let mut out = b"kept".to_vec();
            assert!(unzip_into(&lying, &mut out).is_err(), "prefix {claim} for {orig} bytes");
            assert_eq!(out, b"kept");
        }
        let mut out = b"kept".to_vec();
        unzip_into(&z, &mut out).unwrap();
        assert_eq!(out, [&b"kept"[..], &data].concat());
    }

    #[test]
    fn diff_is_an_involution() {
        let undo = b"abcdefgh".to_vec();
        let mut redo = b"abcdXYghIJ".to_vec();
        let orig = redo.clone();
        undo_diff(&undo, &mut redo);
        undo_diff(&undo, &mut redo);
        assert_eq!(redo, orig);
    }
}
