//! The bytes walcdc hands between processes or keeps beside a cursor (a reader's state, a
//! catalog checkpoint, catalog versions, a range's catalog facts): an 8-byte magic naming the
//! kind, a little-endian `u16` format version, then the value in postcard. One encoder and one
//! checked decoder for every kind: bytes of another kind, another version, cut short or with
//! bytes after the value are an `InvalidArgument` error naming the kind, and nothing in them is
//! trusted for an allocation size (postcard reads lengths against the bytes present).

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{LogError, Result};

/// One kind of framed bytes.
pub struct Framed {
    /// The first eight bytes.
    pub magic: &'static [u8; 8],
    /// Raised when the value's layout changes: older bytes are refused, not misread.
    pub version: u16,
    /// What the bytes are, for errors ("a walcdc reader state").
    pub what: &'static str,
}

impl Framed {
    /// `value` framed; `capacity` is a hint for the buffer.
    pub fn encode<T: Serialize>(&self, value: &T, capacity: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(10 + capacity);
        out.extend_from_slice(self.magic);
        out.extend_from_slice(&self.version.to_le_bytes());
        // Serializing plain data into a Vec cannot fail.
        postcard::to_io(value, &mut out).expect("plain data serializes");
        out
    }

    /// The value of bytes from [`Framed::encode`] of the same kind.
    pub fn decode<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T> {
        let bad = |why: String| LogError::InvalidArgument { msg: format!("not {}: {why}", self.what) };
        let body = bytes.strip_prefix(self.magic.as_slice()).ok_or_else(|| bad("wrong magic".into()))?;
        let (version, body) = body.split_at_checked(2).ok_or_else(|| bad("truncated".into()))?;
        let version = u16::from_le_bytes([version[0], version[1]]);
        if version != self.version {
            return Err(bad(format!("format version {version}, this walcdc reads {}", self.version)));
        }
        let (value, rest) = postcard::take_from_bytes::<T>(body).map_err(|e| bad(e.to_string()))?;
        if !rest.is_empty() {
            return Err(bad(format!("{} bytes after it", rest.len())));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: Framed = Framed { magic: b"WALCDCTT", version: 3, what: "a test value" };

    #[test]
    fn round_trips_and_refuses_every_other_input() {
        let value: Vec<(u64, String)> = vec![(1, "a".into()), (u64::MAX, "bc".into())];
        let bytes = KIND.encode(&value, 0);
        assert_eq!(KIND.decode::<Vec<(u64, String)>>(&bytes).unwrap(), value);
        let refused = |b: &[u8], why: &str| {
            let err = KIND.decode::<Vec<(u64, String)>>(b).unwrap_err().to_string();
            assert!(err.contains("not a test value") && err.contains(why), "{err}");
        };
        refused(b"WALCDCXX\x03\x00", "wrong magic");
        refused(b"WALCDCTT\x03", "truncated");
        refused(b"WALCDCTT\x02\x00", "format version 2, this walcdc reads 3");
        let mut longer = bytes.clone();
        longer.push(0);
        refused(&longer, "1 bytes after it");
        for cut in 10..bytes.len() {
            assert!(KIND.decode::<Vec<(u64, String)>>(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        // A length field claiming more than the bytes hold is refused, not allocated.
        refused(b"WALCDCTT\x03\x00\xff\xff\xff\xff\x0f", "");
    }
}
