//! `LOG_SUPPLEMENTAL_INFO` payloads: the transaction's user, DDL statements, and the DML
//! records that name the data records holding a change's before and after images.

use crate::format::le;
use crate::format::lsa::Lsa;

pub const TRAN_USER: i32 = 0;
pub const UNDO_RECORD: i32 = 1;
pub const DDL: i32 = 2;
pub const INSERT: i32 = 3;
pub const UPDATE: i32 = 4;
pub const DELETE: i32 = 5;
pub const TRIGGER_INSERT: i32 = 6;
pub const TRIGGER_UPDATE: i32 = 7;
pub const TRIGGER_DELETE: i32 = 8;

/// An object identifier `{pageid, slotid, volid}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Oid {
    pub pageid: i32,
    pub slotid: i16,
    pub volid: i16,
}

impl Oid {
    /// The in-memory struct as copied into the log (little-endian, `pageid, slotid, volid`).
    pub fn from_native(b: &[u8]) -> Oid {
        Oid { pageid: le::i32_at(b, 0), slotid: le::i16_at(b, 4), volid: le::i16_at(b, 6) }
    }

    /// The packed form of `or_pack_oid` (big-endian, `pageid, slotid, volid`).
    pub fn from_packed(b: &[u8]) -> Oid {
        Oid { pageid: le::be_i32_at(b, 0), slotid: le::be_i16_at(b, 4), volid: le::be_i16_at(b, 6) }
    }

    /// CUBRID's CDC API packing: `pageid | slotid << 32 | volid << 48`.
    pub fn to_cdc(self) -> u64 {
        (self.pageid as u32 as u64) | ((self.slotid as u16 as u64) << 32) | ((self.volid as u16 as u64) << 48)
    }

    pub fn from_cdc(v: u64) -> Oid {
        Oid { pageid: v as u32 as i32, slotid: (v >> 32) as u16 as i16, volid: (v >> 48) as u16 as i16 }
    }

    pub fn is_null(self) -> bool {
        self.pageid == -1
    }
}

impl std::fmt::Display for Oid {
    /// CUBRID's textual form `volid|pageid|slotid`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}|{}|{}", self.volid, self.pageid, self.slotid)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmlKind {
    Insert,
    Update,
    Delete,
}

/// A DML supplemental record (kinds 3-8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmlSupplement {
    pub kind: DmlKind,
    /// Written by a statement run from a trigger action.
    pub trigger: bool,
    pub class_oid: Oid,
    pub undo_lsa: Option<Lsa>,
    pub redo_lsa: Option<Lsa>,
}

/// A DDL supplemental record (kind 2).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DdlSupplement {
    pub ddl_type: i32,
    pub object_type: i32,
    pub class_oid: Oid,
    pub object_oid: Oid,
    pub statement: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Supplement {
    TranUser(String),
    UndoRecord,
    Ddl(DdlSupplement),
    Dml(DmlSupplement),
}

fn lsa_opt(b: &[u8]) -> Option<Lsa> {
    let l = le::lsa_at(b, 0);
    (!l.is_null()).then_some(l)
}

fn need(payload: &[u8], n: usize, what: &str) -> Result<(), String> {
    if payload.len() < n {
        return Err(format!("{what} supplemental payload of {} bytes, expected at least {n}", payload.len()));
    }
    Ok(())
}

/// Decodes a supplemental payload (already unzipped) of the given kind; a kind CUBRID does not
/// write is an error.
pub fn parse(kind: i32, payload: &[u8]) -> Result<Supplement, String> {
    let dml = |k: DmlKind, trigger: bool| -> Result<Supplement, String> {
        let (undo_lsa, redo_lsa) = match k {
            DmlKind::Insert => {
                need(payload, 16, "INSERT")?;
                (None, lsa_opt(&payload[8..16]))
            }
            DmlKind::Update => {
                need(payload, 24, "UPDATE")?;
                (lsa_opt(&payload[8..16]), lsa_opt(&payload[16..24]))
            }
            DmlKind::Delete => {
                need(payload, 16, "DELETE")?;
                (lsa_opt(&payload[8..16]), None)
            }
        };
        Ok(Supplement::Dml(DmlSupplement {
            kind: k,
            trigger,
            class_oid: Oid::from_native(&payload[0..8]),
            undo_lsa,
            redo_lsa,
        }))
    };
    match kind {
        TRAN_USER => Ok(Supplement::TranUser(String::from_utf8_lossy(payload).into_owned())),
        UNDO_RECORD => Ok(Supplement::UndoRecord),
        DDL => {
            need(payload, 32, "DDL")?;
            let be = |o: usize| le::be_i32_at(payload, o);
            let len = be(24).max(0) as usize;
            let padded = be(28).max(0) as usize;
            let text = &payload[32..];
            if padded > text.len() || len > padded {
                return Err(format!(
                    "DDL statement of {len} bytes ({padded} padded) in a {}-byte payload",
                    payload.len()
                ));
            }
            Ok(Supplement::Ddl(DdlSupplement {
                ddl_type: be(0),
                object_type: be(4),
                class_oid: Oid::from_packed(&payload[8..16]),
                object_oid: Oid::from_packed(&payload[16..24]),
                statement: String::from_utf8_lossy(&text[..len]).into_owned(),
            }))
        }
        INSERT => dml(DmlKind::Insert, false),
        UPDATE => dml(DmlKind::Update, false),
        DELETE => dml(DmlKind::Delete, false),
        TRIGGER_INSERT => dml(DmlKind::Insert, true),
        TRIGGER_UPDATE => dml(DmlKind::Update, true),
        TRIGGER_DELETE => dml(DmlKind::Delete, true),
        // CUBRID writes kinds 0..=8 only (SUPPLEMENT_REC_TYPE): another kind is damage, and
        // skipping it would lose the change it stands for without a trace.
        k => Err(format!("supplemental record of kind {k}, which CUBRID does not write")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oid_packings() {
        let o = Oid { pageid: 10, slotid: 3, volid: 0 };
        assert_eq!(o.to_cdc(), 0x0000_0003_0000_000A);
        assert_eq!(Oid::from_cdc(o.to_cdc()), o);
        // A NULL OID packed by or_pack_oid is (-1, 0, 0).
        let null = Oid::from_packed(&[0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0]);
        assert!(null.is_null());
        assert_eq!(null.to_cdc(), 0x0000_0000_FFFF_FFFF);
    }

    #[test]
    fn ddl_payload() {
        let stmt = b"create table t (a int)";
        let mut p = Vec::new();
        p.extend_from_slice(&0i32.to_be_bytes());
        p.extend_from_slice(&0i32.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 229, 0, 1, 0, 0]);
        p.extend_from_slice(&[0, 0, 0, 229, 0, 1, 0, 0]);
        p.extend_from_slice(&(stmt.len() as i32).to_be_bytes());
        let padded = (stmt.len() + 1).div_ceil(4) * 4;
        p.extend_from_slice(&(padded as i32).to_be_bytes());
        p.extend_from_slice(stmt);
        p.resize(32 + padded, 0);
        match parse(DDL, &p).unwrap() {
            Supplement::Ddl(d) => {
                assert_eq!(d.statement, "create table t (a int)");
                assert_eq!(d.class_oid, Oid { pageid: 229, slotid: 1, volid: 0 });
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(DDL, &p[..20]).is_err());
    }
}
