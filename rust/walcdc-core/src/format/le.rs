//! Little-endian field readers for the log's native structs (the engine `memcpy`s its C
//! structs to pages on x86-64). Callers have checked that the bytes exist.

use crate::lsa::Lsa;

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
