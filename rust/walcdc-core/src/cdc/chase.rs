//! The CDC chase: from the undo/redo LSAs of a DML supplemental record to the data records that
//! hold the row's before and after images, and the images rebuilt as the heap holds them.

use crate::error::{LogError, Result};
use crate::format::heap::{self, MVCC_FLAG_DELID, MVCC_FLAG_INSID, MVCC_FLAG_PREV_VERSION};
use crate::format::le;
use crate::format::lsa::Lsa;
use crate::format::rcvindex::*;
use crate::format::rectype::*;
use crate::format::supplemental::{self, DmlKind, DmlSupplement, Oid};
use crate::log::payload::ReadPayloads;
use crate::log::record::ReadRecords;
use crate::log::record::Record;
use crate::log::source::LogSource;

pub use crate::format::heap::{REC_ASSIGN_ADDRESS, REC_BIGONE, REC_HOME, REC_NEWHOME, REC_RELOCATION, REC_UNKNOWN};

const RVOVF_NEWPAGE_LINK: i32 = 55;
const RVOVF_CHANGE_LINK: i32 = 57;
/// A heap operation's records lie close together; a walk that has not found its record after
/// this many steps of the transaction's chain gives up.
const MAX_OPERATION_STEPS: usize = 1 << 16;

/// A heap record image: its slot record type and the record bytes (header included).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Image {
    /// `REC_HOME`, `REC_NEWHOME`, ...; `REC_BIGONE` for a row reassembled from overflow pages.
    pub rec_type: i16,
    pub row: Vec<u8>,
}

impl Image {
    /// The image a heap record descriptor's payload (`[type][row]`) holds, keeping the
    /// payload's buffer (no second copy of the row).
    fn from_recdes_vec(mut payload: Vec<u8>, at: Lsa, log: &dyn LogSource) -> Result<Image> {
        if payload.len() < 2 {
            return Err(LogError::corrupt(&log.set_name(), at, "heap image shorter than its 2-byte record type"));
        }
        let rec_type = le::i16_at(&payload, 0);
        payload.drain(..2);
        Ok(Image { rec_type, row: payload })
    }
}

/// The operation a DML supplemental record closes: its records lie between the transaction's
/// previous DML or DDL supplemental record (the floor) and it. Chain walks stay inside it, so
/// that all chases together read a number of records bounded by the size of the log, whatever
/// its LSAs say (a cycle or a pointer far back cannot make one event cost a long walk).
struct Operation<'a> {
    log: &'a dyn LogSource,
    /// The supplemental record.
    supp: &'a Record,
    floor: std::cell::OnceCell<Option<Lsa>>,
    /// The records this chase has read: its images, its chain walk and its floor meet the
    /// same few records (an update's undo and redo LSAs name one record, which is also the
    /// home record the chain walk looks for).
    seen: std::cell::RefCell<Seen>,
}

/// The last few records a chase read, oldest replaced first.
#[derive(Default)]
struct Seen {
    records: [Option<Record>; SEEN],
    next: usize,
}

const SEEN: usize = 4;

impl<'a> Operation<'a> {
    fn new(log: &'a dyn LogSource, supp: &'a Record) -> Self {
        Operation { log, supp, floor: std::cell::OnceCell::new(), seen: Default::default() }
    }

    /// The record at `lsa`: the supplemental record itself, one read before, or a random read.
    fn record_at(&self, lsa: Lsa) -> Result<Record> {
        if lsa == self.supp.lsa {
            return Ok(*self.supp);
        }
        let mut seen = self.seen.borrow_mut();
        if let Some(r) = seen.records.iter().flatten().find(|r| r.lsa == lsa) {
            return Ok(*r);
        }
        let r = self.log.record_at(lsa)?;
        let i = seen.next;
        seen.records[i] = Some(r);
        seen.next = (i + 1) % SEEN;
        Ok(r)
    }

    /// Whether `lsa` lies inside the operation (after its floor, before its supplemental record).
    fn holds(&self, lsa: Lsa) -> bool {
        lsa < self.supp.lsa && self.floor().is_none_or(|f| lsa > f)
    }

    fn floor(&self) -> Option<Lsa> {
        *self.floor.get_or_init(|| {
            let mut cur = self.supp.prev_tranlsa;
            let mut above = self.supp.lsa;
            for _ in 0..MAX_OPERATION_STEPS {
                if cur.is_null() {
                    return None;
                }
                if cur >= above {
                    return Some(above); // the chain does not go back: stop where it turns
                }
                let Ok(h) = self.record_at(cur) else { return Some(cur) };
                if h.trid != self.supp.trid || ends_operation(&h) {
                    return Some(cur);
                }
                above = cur;
                cur = h.prev_tranlsa;
            }
            Some(cur)
        })
    }
}

/// A DML or DDL supplemental record: the end of the operation before it.
fn ends_operation(h: &Record) -> bool {
    h.rectype == LOG_SUPPLEMENTAL_INFO
        && !matches!(h.supplement_type(), Some(supplemental::UNDO_RECORD | supplemental::TRAN_USER))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Before,
    After,
}

fn wrong_kind(log: &dyn LogSource, rec: &Record, side: Side, from: Lsa) -> LogError {
    LogError::corrupt(
        &log.set_name(),
        rec.lsa,
        format!(
            "the supplemental record at {from} points here for a {} image, but {} {} holds none",
            if side == Side::Before { "before" } else { "after" },
            rec.type_name(),
            rec.rcvindex().and_then(rcvindex_name).unwrap_or("(no rcvindex)")
        ),
    )
}

/// The undo (before) or redo (after) part of a record, unzipped, DIFF rebuilt.
fn part(log: &dyn LogSource, rec: &Record, side: Side) -> Result<Vec<u8>> {
    let (mut undo, mut redo, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    match side {
        Side::Before => {
            log.payload_into(&rec.undo, &mut scratch, &mut undo)?;
            Ok(undo)
        }
        // Only a zipped DIFF redo needs the undo image (it is XORed over it).
        Side::After if is_diff(rec.rectype) && rec.redo.zipped => {
            log.images(rec, &mut undo, &mut redo)?;
            Ok(redo)
        }
        Side::After => {
            log.payload_into(&rec.redo, &mut scratch, &mut redo)?;
            Ok(redo)
        }
    }
}

/// MVCC insert redo images omit the insert id: `[type][W][CHN][body]`. Rebuild the record header
/// with the log record's MVCCID so that the image is the row as the heap holds it.
fn rebuild_mvcc_insert(log: &dyn LogSource, rec: &Record, payload: Vec<u8>) -> Result<Image> {
    if payload.len() < 2 {
        return Image::from_recdes_vec(payload, rec.lsa, log); // its error
    }
    let rec_type = le::i16_at(&payload, 0);
    if rec_type == REC_BIGONE || rec_type == REC_ASSIGN_ADDRESS {
        return Image::from_recdes_vec(payload, rec.lsa, log);
    }
    // The row is built once, from the payload after its record type: no copy in between.
    let body = &payload[2..];
    if body.len() < 8 {
        return Err(LogError::corrupt(&log.set_name(), rec.lsa, "MVCC insert image shorter than its header"));
    }
    let flags = heap::mvcc_flags(le::be_u32_at(body, 0));
    let mut row = Vec::with_capacity(body.len() + 24);
    row.extend_from_slice(&body[0..8]);
    if flags & MVCC_FLAG_INSID != 0 {
        row.extend_from_slice(&rec.mvccid().unwrap_or(0).to_be_bytes());
    }
    if flags & MVCC_FLAG_DELID != 0 {
        row.extend_from_slice(&[0u8; 8]);
    }
    if flags & MVCC_FLAG_PREV_VERSION != 0 {
        row.extend_from_slice(&[0u8; 8]);
    }
    row.extend_from_slice(&body[8..]);
    Ok(Image { rec_type, row })
}

/// The image a supplemental record's LSA leads to (§7.3 of the format notes).
fn image_at(op: &Operation, at: Lsa, side: Side) -> Result<Image> {
    let (log, from) = (op.log, op.supp.lsa);
    if at >= from {
        return Err(LogError::corrupt(
            &log.set_name(),
            from,
            format!("the supplemental record's LSA {at} leads nowhere: it does not lie before it"),
        ));
    }
    let rec = op.record_at(at).map_err(|e| match e {
        // No record starts where the supplemental record points: it is the corrupt one.
        LogError::BadPosition { msg, .. } | LogError::InvalidArgument { msg } | LogError::CorruptRecord { msg, .. } => {
            LogError::corrupt(&log.set_name(), from, format!("the supplemental record's LSA {at} leads nowhere: {msg}"))
        }
        e => e,
    })?;
    let rcv = rec.rcvindex();
    let t = rec.rectype;
    let undoredo = t == LOG_UNDOREDO_DATA || t == LOG_DIFF_UNDOREDO_DATA;
    let mvcc_undoredo = t == LOG_MVCC_UNDOREDO_DATA || t == LOG_MVCC_DIFF_UNDOREDO_DATA;
    match side {
        Side::Before => match (t, rcv) {
            (LOG_SUPPLEMENTAL_INFO, _) if rec.supplement_type() == Some(supplemental::UNDO_RECORD) => {
                Image::from_recdes_vec(part(log, &rec, Side::Before)?, at, log)
            }
            (_, Some(RVHF_MVCC_DELETE_MODIFY_HOME | RVHF_UPDATE_NOTIFY_VACUUM)) if mvcc_undoredo => {
                Image::from_recdes_vec(part(log, &rec, side)?, at, log)
            }
            (_, Some(RVHF_DELETE | RVHF_UPDATE)) if undoredo => Image::from_recdes_vec(part(log, &rec, side)?, at, log),
            (LOG_UNDO_DATA, Some(RVHF_MVCC_UPDATE_OVERFLOW)) => Image::from_recdes_vec(part(log, &rec, side)?, at, log),
            (_, Some(RVOVF_NEWPAGE_LINK | RVOVF_CHANGE_LINK)) if undoredo => overflow_row(op, &rec, side),
            (LOG_UNDO_DATA | LOG_REDO_DATA, Some(RVOVF_PAGE_UPDATE)) => overflow_row(op, &rec, side),
            _ => Err(wrong_kind(log, &rec, side, from)),
        },
        Side::After => match (t, rcv) {
            (_, Some(RVHF_MVCC_INSERT)) if mvcc_undoredo => rebuild_mvcc_insert(log, &rec, part(log, &rec, side)?),
            (_, Some(RVHF_UPDATE_NOTIFY_VACUUM)) if mvcc_undoredo => {
                Image::from_recdes_vec(part(log, &rec, side)?, at, log)
            }
            (_, Some(RVHF_INSERT | RVHF_INSERT_NEWHOME | RVHF_UPDATE)) if undoredo => {
                Image::from_recdes_vec(part(log, &rec, side)?, at, log)
            }
            (_, Some(RVOVF_NEWPAGE_LINK | RVOVF_CHANGE_LINK)) if undoredo => overflow_row(op, &rec, side),
            (LOG_REDO_DATA, Some(RVOVF_NEWPAGE_INSERT | RVOVF_PAGE_UPDATE)) => overflow_row(op, &rec, side),
            (LOG_UNDO_DATA, Some(RVOVF_PAGE_UPDATE)) => overflow_row(op, &rec, side),
            _ => Err(wrong_kind(log, &rec, side, from)),
        },
    }
}

/// Rebuilds a multi-page (overflow) row from its page images, walking the transaction's chain
/// back from `start` to the `LOG_DUMMY_OVF_RECORD` that precedes the first page.
fn overflow_row(op: &Operation, start: &Record, side: Side) -> Result<Image> {
    let log = op.log;
    let is_redo = side == Side::After;
    let mut rcv = start.rcvindex().unwrap_or(-1);
    let trid = start.trid;
    let mut cur = start.lsa;
    // A page record of the other direction is not itself an image of the wanted side.
    let opposite_page = rcv == RVOVF_PAGE_UPDATE
        && ((start.rectype == LOG_UNDO_DATA && is_redo) || (start.rectype == LOG_REDO_DATA && !is_redo));
    if opposite_page || rcv == RVOVF_CHANGE_LINK || rcv == RVOVF_NEWPAGE_LINK {
        cur = start.prev_tranlsa;
        if rcv == RVOVF_CHANGE_LINK || rcv == RVOVF_NEWPAGE_LINK {
            rcv = RVOVF_PAGE_UPDATE;
        }
    }
    let corrupt = |at: Lsa, msg: String| LogError::corrupt(&log.set_name(), at, msg);
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let mut steps = 0usize;
    let mut last = Lsa::new(i64::MAX >> 16, 0);
    while !cur.is_null() {
        steps += 1;
        if steps > MAX_OPERATION_STEPS || cur >= last {
            return Err(corrupt(start.lsa, format!("overflow chain from {} does not end", start.lsa)));
        }
        last = cur;
        if !op.holds(cur) {
            break; // left the operation without meeting the first page: the length check tells
        }
        let h = op.record_at(cur)?;
        if h.trid != trid || h.rectype == LOG_DUMMY_OVF_RECORD {
            if !is_redo && h.rectype == LOG_DUMMY_OVF_RECORD && !h.prev_tranlsa.is_null() {
                // The first page's before image is logged just before the marker.
                let first = op.record_at(h.prev_tranlsa)?;
                if first.rcvindex() == Some(rcv) {
                    parts.push(part(log, &first, Side::Before)?);
                }
            }
            break;
        }
        let page_record = if is_redo {
            h.rectype == LOG_REDO_DATA || h.rectype == LOG_MVCC_REDO_DATA
        } else {
            h.rectype == LOG_UNDO_DATA || h.rectype == LOG_MVCC_UNDO_DATA
        };
        if page_record {
            if h.rcvindex() != Some(rcv) {
                return Err(corrupt(
                    h.lsa,
                    format!(
                        "overflow chain from {} meets a page record of another kind ({:?})",
                        start.lsa,
                        h.rcvindex()
                    ),
                ));
            }
            let mut scratch = Vec::new();
            let mut p = Vec::new();
            log.payload_into(if is_redo { &h.redo } else { &h.undo }, &mut scratch, &mut p)?;
            parts.push(p);
        }
        cur = h.prev_tranlsa;
    }
    parts.reverse();
    let Some(first) = parts.first() else {
        return Err(corrupt(start.lsa, "overflow chain holds no page image".into()));
    };
    let Some(length) = heap::overflow_length(first) else {
        return Err(corrupt(start.lsa, "first overflow page image shorter than its 12-byte header".into()));
    };
    let mut row = first[heap::OVERFLOW_FIRST_HEADER..].to_vec();
    for p in &parts[1..] {
        if p.len() < heap::OVERFLOW_HEADER {
            return Err(corrupt(start.lsa, "overflow page image shorter than its 8-byte header".into()));
        }
        row.extend_from_slice(&p[heap::OVERFLOW_HEADER..]);
    }
    if length < 0 || length as usize > row.len() {
        return Err(corrupt(
            start.lsa,
            format!("overflow row says {length} bytes, its pages in the log hold {}", row.len()),
        ));
    }
    row.truncate(length as usize);
    Ok(Image { rec_type: REC_BIGONE, row })
}

/// After an update moved a row (the home slot's new image is a forwarding record), find the
/// new image written just before: the `RVHF_INSERT_NEWHOME` record or the new overflow pages.
fn follow_forwarding(op: &Operation, home: Lsa) -> Result<Option<Image>> {
    let log = op.log;
    let rec = op.record_at(home)?;
    let mut cur = rec.prev_tranlsa;
    let mut above = home;
    for _ in 0..MAX_OPERATION_STEPS {
        if cur.is_null() || cur >= above || !op.holds(cur) {
            break;
        }
        above = cur;
        let h = op.record_at(cur)?;
        if h.trid != rec.trid || h.rectype == LOG_SUPPLEMENTAL_INFO {
            break;
        }
        match h.rcvindex() {
            Some(RVHF_INSERT_NEWHOME) => {
                return Ok(Some(Image::from_recdes_vec(part(log, &h, Side::After)?, h.lsa, log)?))
            }
            Some(RVOVF_NEWPAGE_INSERT) if h.rectype == LOG_REDO_DATA => {
                return overflow_row(op, &h, Side::After).map(Some)
            }
            _ => {}
        }
        cur = h.prev_tranlsa;
    }
    Ok(None)
}

/// What the chase of one DML supplemental record found.
#[derive(Clone, Debug, Default)]
pub struct Chased {
    pub before: Option<Image>,
    pub after: Option<Image>,
    /// The heap record the change touched (its home slot), when the log names it.
    pub row_oid: Option<Oid>,
    /// The update's before image is an OID reservation: CUBRID reports it as an insert.
    pub assign_address: bool,
}

/// Follows the DML supplemental record `supp` to its images. `want_before` / `want_after` limit
/// the work to the images the caller keeps.
pub fn chase(
    log: &dyn LogSource,
    supp: &Record,
    dml: &DmlSupplement,
    want_before: bool,
    want_after: bool,
) -> Result<Chased> {
    let at = supp.lsa;
    // The LSAs followed come from the log, not from the caller: one that leads nowhere makes
    // the supplemental record corrupt (not a wrong argument).
    chase_images(&Operation::new(log, supp), dml, want_before, want_after).map_err(|e| match e {
        LogError::BadPosition { msg, .. } | LogError::InvalidArgument { msg } => {
            LogError::corrupt(&log.set_name(), at, format!("the supplemental record leads nowhere: {msg}"))
        }
        e => e,
    })
}

fn chase_images(op: &Operation, dml: &DmlSupplement, want_before: bool, want_after: bool) -> Result<Chased> {
    let (log, at) = (op.log, op.supp.lsa);
    let mut out = Chased::default();
    let need_undo = dml.kind != DmlKind::Insert;
    let need_redo = dml.kind != DmlKind::Delete;
    let missing = |what: &str| {
        LogError::corrupt(&log.set_name(), at, format!("{:?} supplemental record without its {what} LSA", dml.kind))
    };
    if need_undo {
        let u = dml.undo_lsa.ok_or_else(|| missing("undo"))?;
        // The update of an OID reservation is reported as an insert: its before image decides.
        if want_before || dml.kind == DmlKind::Update {
            let img = image_at(op, u, Side::Before)?;
            out.assign_address = dml.kind == DmlKind::Update && img.rec_type == REC_ASSIGN_ADDRESS;
            if want_before && !out.assign_address {
                out.before = Some(img);
            }
        }
    }
    if need_redo && want_after {
        let r = dml.redo_lsa.ok_or_else(|| missing("redo"))?;
        let mut img = image_at(op, r, Side::After)?;
        if img.rec_type == REC_RELOCATION || (img.rec_type == REC_BIGONE && img.row.len() == 8) {
            if let Some(moved) = follow_forwarding(op, r)? {
                img = moved;
            }
        }
        out.after = Some(img);
    }
    out.row_oid = row_oid(op, dml)?;
    Ok(out)
}

/// The home slot a DML changed: the heap record of the operation, found by walking the
/// transaction's chain back from the supplemental record through the operation's records.
fn row_oid(op: &Operation, dml: &DmlSupplement) -> Result<Option<Oid>> {
    let home: &[i32] = match dml.kind {
        DmlKind::Insert => &[RVHF_MVCC_INSERT, RVHF_INSERT],
        DmlKind::Update => {
            &[RVHF_UPDATE_NOTIFY_VACUUM, RVHF_UPDATE, RVHF_MVCC_DELETE_MODIFY_HOME, RVHF_MVCC_NO_MODIFY_HOME]
        }
        DmlKind::Delete => {
            &[RVHF_MVCC_DELETE_REC_HOME, RVHF_MVCC_DELETE_MODIFY_HOME, RVHF_MVCC_NO_MODIFY_HOME, RVHF_DELETE]
        }
    };
    let mut cur = op.supp.prev_tranlsa;
    let mut above = op.supp.lsa;
    for _ in 0..MAX_OPERATION_STEPS {
        if cur.is_null() {
            return Ok(None);
        }
        if cur >= above {
            return Err(LogError::corrupt(
                &op.log.set_name(),
                above,
                format!("prev_tranlsa {cur} does not lie before the record (a cycle in the transaction's chain)"),
            ));
        }
        above = cur;
        let h = op.record_at(cur)?;
        if h.trid != op.supp.trid {
            return Ok(None);
        }
        // The previous operation's supplemental record ends this operation's records.
        if ends_operation(&h) {
            return Ok(None);
        }
        if let (Some(rcv), Some(oid)) = (h.rcvindex(), h.data_oid()) {
            if home.contains(&rcv) && h.rectype != LOG_COMPENSATE {
                return Ok(Some(oid));
            }
        }
        cur = h.prev_tranlsa;
    }
    Ok(None)
}
