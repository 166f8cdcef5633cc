//! The spill file format: events of transactions past the memory bound, one after another,
//! little-endian, length-prefixed fields.

use std::io::{Read, Write};
use std::sync::Arc;

use crate::cdc::chase::Image;
use crate::cdc::event::{Event, Op};
use crate::format::lsa::Lsa;
use crate::format::supplemental::{DdlSupplement, Oid};

fn put_bytes(w: &mut impl Write, b: &[u8]) -> std::io::Result<()> {
    w.write_all(&(b.len() as u32).to_le_bytes())?;
    w.write_all(b)
}

fn put_opt_bytes(w: &mut impl Write, b: Option<&[u8]>) -> std::io::Result<()> {
    match b {
        Some(b) => {
            w.write_all(&[1])?;
            put_bytes(w, b)
        }
        None => w.write_all(&[0]),
    }
}

fn put_opt_u64(w: &mut impl Write, v: Option<u64>) -> std::io::Result<()> {
    match v {
        Some(v) => {
            w.write_all(&[1])?;
            w.write_all(&v.to_le_bytes())
        }
        None => w.write_all(&[0]),
    }
}

fn put_image(w: &mut impl Write, i: Option<&Image>) -> std::io::Result<()> {
    match i {
        Some(i) => {
            w.write_all(&[1])?;
            w.write_all(&i.rec_type.to_le_bytes())?;
            put_bytes(w, &i.row)
        }
        None => w.write_all(&[0]),
    }
}

pub(crate) fn write_event(w: &mut impl Write, e: &Event) -> std::io::Result<()> {
    w.write_all(&e.lsa.to_raw().to_le_bytes())?;
    w.write_all(&e.vol.to_le_bytes())?;
    w.write_all(&e.trid.to_le_bytes())?;
    w.write_all(&[e.op.index(), e.trigger as u8 | (e.hidden as u8) << 1])?;
    put_opt_bytes(w, e.user.as_deref().map(str::as_bytes))?;
    put_opt_u64(w, e.class_oid.map(Oid::to_cdc))?;
    put_opt_u64(w, e.row_oid.map(Oid::to_cdc))?;
    put_image(w, e.before.as_ref())?;
    put_image(w, e.after.as_ref())?;
    match &e.ddl {
        Some(d) => {
            w.write_all(&[1])?;
            w.write_all(&d.ddl_type.to_le_bytes())?;
            w.write_all(&d.object_type.to_le_bytes())?;
            w.write_all(&d.class_oid.to_cdc().to_le_bytes())?;
            w.write_all(&d.object_oid.to_cdc().to_le_bytes())?;
            put_bytes(w, d.statement.as_bytes())?;
        }
        None => w.write_all(&[0])?,
    }
    put_opt_u64(w, e.time.map(|t| t as u64))?;
    put_opt_bytes(w, e.error.as_deref().map(str::as_bytes))
}

fn get<const N: usize>(r: &mut impl Read) -> std::io::Result<[u8; N]> {
    let mut b = [0u8; N];
    r.read_exact(&mut b)?;
    Ok(b)
}

fn get_bytes(r: &mut impl Read) -> std::io::Result<Vec<u8>> {
    let n = u32::from_le_bytes(get::<4>(r)?) as usize;
    let mut b = vec![0u8; n];
    r.read_exact(&mut b)?;
    Ok(b)
}

fn get_flag(r: &mut impl Read) -> std::io::Result<bool> {
    Ok(get::<1>(r)?[0] != 0)
}

fn get_opt_u64(r: &mut impl Read) -> std::io::Result<Option<u64>> {
    Ok(if get_flag(r)? { Some(u64::from_le_bytes(get::<8>(r)?)) } else { None })
}

fn get_image(r: &mut impl Read) -> std::io::Result<Option<Image>> {
    if !get_flag(r)? {
        return Ok(None);
    }
    let rec_type = i16::from_le_bytes(get::<2>(r)?);
    Ok(Some(Image { rec_type, row: get_bytes(r)? }))
}

fn string(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

pub(crate) fn read_event(r: &mut impl Read) -> std::io::Result<Event> {
    let lsa = Lsa::from_raw(u64::from_le_bytes(get::<8>(r)?));
    let vol = u16::from_le_bytes(get::<2>(r)?);
    let trid = i32::from_le_bytes(get::<4>(r)?);
    let [op, trigger] = get::<2>(r)?;
    let mut e = Event::new(lsa, trid, Op::ALL[op as usize % Op::ALL.len()]);
    e.vol = vol;
    e.trigger = trigger & 1 != 0;
    e.hidden = trigger & 2 != 0;
    e.user = if get_flag(r)? { Some(Arc::from(string(get_bytes(r)?).as_str())) } else { None };
    e.class_oid = get_opt_u64(r)?.map(Oid::from_cdc);
    e.row_oid = get_opt_u64(r)?.map(Oid::from_cdc);
    e.before = get_image(r)?;
    e.after = get_image(r)?;
    if get_flag(r)? {
        let ddl_type = i32::from_le_bytes(get::<4>(r)?);
        let object_type = i32::from_le_bytes(get::<4>(r)?);
        let class_oid = Oid::from_cdc(u64::from_le_bytes(get::<8>(r)?));
        let object_oid = Oid::from_cdc(u64::from_le_bytes(get::<8>(r)?));
        let statement = string(get_bytes(r)?);
        e.ddl = Some(DdlSupplement { ddl_type, object_type, class_oid, object_oid, statement });
    }
    e.time = get_opt_u64(r)?.map(|t| t as i64);
    e.error = if get_flag(r)? { Some(string(get_bytes(r)?)) } else { None };
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spill_round_trip() {
        let mut e = Event::new(Lsa::new(7, 64), 42, Op::Update);
        e.vol = 3;
        e.user = Some(Arc::from("DBA"));
        e.class_oid = Some(Oid { pageid: 229, slotid: 1, volid: 0 });
        e.before = Some(Image { rec_type: 2, row: vec![1, 2, 3] });
        e.after = Some(Image { rec_type: 5, row: vec![9; 5000] });
        e.ddl = Some(DdlSupplement {
            ddl_type: 1,
            object_type: 2,
            class_oid: Oid { pageid: -1, slotid: 0, volid: 0 },
            object_oid: Oid { pageid: 3, slotid: 4, volid: 0 },
            statement: "alter".into(),
        });
        e.time = Some(1_700_000_000);
        e.error = Some("why".into());
        e.trigger = true;
        let mut hidden = Event::new(Lsa::new(8, 0), 1, Op::Insert);
        hidden.hidden = true;
        let mut buf = Vec::new();
        write_event(&mut buf, &e).unwrap();
        write_event(&mut buf, &hidden).unwrap();
        let mut r = &buf[..];
        assert_eq!(read_event(&mut r).unwrap(), e);
        assert_eq!(read_event(&mut r).unwrap(), hidden);
    }
}
