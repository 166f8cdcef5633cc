//! Byte readers, in one place. Little-endian for the log's native structs (the engine
//! `memcpy`s its C structs to pages on x86-64); big-endian for what the engine packs in network
//! order (heap records, `or_pack` streams). The plain readers are for bytes the caller has
//! checked exist; the `*_checked` ones return `None` past the end.

use crate::format::lsa::Lsa;

pub fn i16_at(b: &[u8], o: usize) -> i16 {
    i16::from_le_bytes([b[o], b[o + 1]])
}

pub fn i32_at(b: &[u8], o: usize) -> i32 {
    i32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

pub fn i64_at(b: &[u8], o: usize) -> i64 {
    i64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

pub fn lsa_at(b: &[u8], o: usize) -> Lsa {
    Lsa::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

pub fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

pub fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

pub fn be_i16_at(b: &[u8], o: usize) -> i16 {
    i16::from_be_bytes([b[o], b[o + 1]])
}

pub fn be_i32_at(b: &[u8], o: usize) -> i32 {
    i32::from_be_bytes(b[o..o + 4].try_into().unwrap())
}

pub fn be_u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes(b[o..o + 4].try_into().unwrap())
}

pub fn be_u16_checked(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

pub fn be_u32_checked(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

pub fn be_i32_checked(b: &[u8], at: usize) -> Option<i32> {
    be_u32_checked(b, at).map(|v| v as i32)
}

pub fn be_u64_checked(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

pub fn be_i64_checked(b: &[u8], at: usize) -> Option<i64> {
    be_u64_checked(b, at).map(|v| v as i64)
}
