//! Log sequence addresses: `(pageid, offset)` pairs, as the engine stores and orders them.

use std::fmt;
use std::str::FromStr;

/// A log address: logical page id (48-bit signed) and area offset (16-bit signed).
///
/// The derived ordering (page id, then offset) is the engine's `operator<`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
pub struct Lsa {
    pub pageid: i64,
    pub offset: i16,
}

impl Lsa {
    /// `NULL_LSA`: all eight bytes 0xFF on disk.
    pub const NULL: Lsa = Lsa { pageid: -1, offset: -1 };

    pub const fn new(pageid: i64, offset: i16) -> Lsa {
        Lsa { pageid, offset }
    }

    /// The engine tests only the page id for NULL (`LSA_ISNULL`).
    pub fn is_null(self) -> bool {
        self.pageid == -1
    }

    /// Decode the on-disk form: a little-endian u64 whose low 48 bits are the signed page id
    /// and whose high 16 bits are the signed offset.
    pub fn from_raw(raw: u64) -> Lsa {
        let pageid = ((raw << 16) as i64) >> 16;
        Lsa { pageid, offset: (raw >> 48) as u16 as i16 }
    }

    pub fn from_le_bytes(bytes: [u8; 8]) -> Lsa {
        Lsa::from_raw(u64::from_le_bytes(bytes))
    }

    /// The on-disk form; also the packing of CUBRID's CDC API (page id low, offset high).
    pub fn to_raw(self) -> u64 {
        (self.pageid as u64 & 0xFFFF_FFFF_FFFF) | ((self.offset as u16 as u64) << 48)
    }

    /// An order-preserving u64: `pageid << 16 | offset`. Defined for non-NULL addresses.
    pub fn to_key(self) -> u64 {
        ((self.pageid as u64) << 16) | self.offset as u16 as u64
    }

    pub fn from_key(key: u64) -> Lsa {
        Lsa { pageid: (key >> 16) as i64, offset: key as u16 as i16 }
    }

    /// `to_key`, with NULL mapped to `None`.
    pub fn key_or_none(self) -> Option<u64> {
        if self.is_null() {
            None
        } else {
            Some(self.to_key())
        }
    }
}

impl fmt::Display for Lsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}|{}", self.pageid, self.offset)
    }
}

impl fmt::Debug for Lsa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Lsa {
    type Err = String;

    /// Parses `pageid|offset` (the form the engine's dumps print).
    fn from_str(s: &str) -> Result<Lsa, String> {
        let (p, o) = s.trim().split_once('|').ok_or_else(|| format!("not an LSA (expected pageid|offset): {s:?}"))?;
        let pageid: i64 = p.trim().parse().map_err(|_| format!("bad page id in LSA {s:?}"))?;
        let offset: i16 = o.trim().parse().map_err(|_| format!("bad offset in LSA {s:?}"))?;
        Ok(Lsa { pageid, offset })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_disk_example_from_the_format() {
        // LSA (0x123456789A, 0x1234) is stored 9a 78 56 34 12 00 34 12.
        let lsa = Lsa::from_le_bytes([0x9a, 0x78, 0x56, 0x34, 0x12, 0x00, 0x34, 0x12]);
        assert_eq!(lsa, Lsa::new(0x12_3456_789A, 0x1234));
        assert_eq!(lsa.to_raw().to_le_bytes(), [0x9a, 0x78, 0x56, 0x34, 0x12, 0x00, 0x34, 0x12]);
    }

    #[test]
    fn null_is_all_ones() {
        assert!(Lsa::from_raw(u64::MAX).is_null());
        assert_eq!(Lsa::NULL.to_raw(), u64::MAX);
        assert_eq!(Lsa::from_raw(u64::MAX), Lsa::NULL);
    }

    #[test]
    fn key_preserves_order_and_round_trips() {
        let a = Lsa::new(5, 4000);
        let b = Lsa::new(6, 0);
        assert!(a < b && a.to_key() < b.to_key());
        assert_eq!(Lsa::from_key(a.to_key()), a);
        assert_eq!("15423|1224".parse::<Lsa>().unwrap(), Lsa::new(15423, 1224));
        assert_eq!(Lsa::new(15423, 1224).to_string(), "15423|1224");
        assert!("15423".parse::<Lsa>().is_err());
    }
}
