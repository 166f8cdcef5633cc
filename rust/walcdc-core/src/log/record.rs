//! Log records: the 32-byte header, the data header of each type, and where the undo and
//! redo payloads lie, following the writer's placement rules exactly.

use crate::error::{LogError, Result};
use crate::format::le::{i16_at, i32_at, i64_at, lsa_at, u32_at};
use crate::format::lsa::Lsa;
use crate::format::page::PAGE_HEADER_SIZE;
use crate::format::rectype::{self, *};
use crate::log::source::{Absent, Fetch, Page};
use crate::log::source::{LogSource, PageSource};

/// `sizeof(LOG_RECORD_HEADER)`.
pub const RECORD_HEADER_SIZE: usize = 32;
/// Offsets of the record header's fields (`LOG_RECORD_HEADER`).
pub const PREV_TRANLSA_AT: usize = 0;
pub const BACK_LSA_AT: usize = 8;
pub const FORW_LSA_AT: usize = 16;
pub const TRID_AT: usize = 24;
pub const TYPE_AT: usize = 28;
const ALIGNMENT: usize = 8;
const ZIP_BIT: u32 = 0x8000_0000;

/// Where a payload lies in the log: its first byte and its stored length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Payload {
    pub start: Lsa,
    /// The record the payload belongs to, and the volume of its header (for error messages).
    pub record: Lsa,
    pub record_vol: u16,
    /// Bytes in the log (zip bit stripped).
    pub stored_len: u32,
    /// LZ4-compressed: `[u32 original length][LZ4 block]`.
    pub zipped: bool,
    /// A zipped payload's original-length prefix, when the parse held the page it lies on (it
    /// saves a caller that wants only lengths a second fetch); unchecked, see
    /// [`crate::log::payload::original_len`].
    pub prefix: Option<u32>,
}

/// One log record: its header, its data header (raw bytes, decoded by the accessors below) and
/// the location of its payloads. Small and `Copy`: the walker allocates nothing per record.
#[derive(Clone, Copy)]
pub struct Record {
    pub lsa: Lsa,
    pub prev_tranlsa: Lsa,
    pub back_lsa: Lsa,
    pub forw_lsa: Lsa,
    pub trid: i32,
    pub rectype: i32,
    dh: [u8; MAX_DATA_HEADER],
    dh_len: u8,
    /// First payload slot ("undo" for page updates; the single variable part of other types).
    pub undo: Payload,
    /// Second payload slot.
    pub redo: Payload,
    /// The next record's LSA, computed from the layout rules (equals `forw_lsa` when valid).
    pub end: Lsa,
    /// Volume holding the record header's page.
    pub vol: u16,
}

impl Default for Record {
    fn default() -> Record {
        Record {
            lsa: Lsa::default(),
            prev_tranlsa: Lsa::default(),
            back_lsa: Lsa::default(),
            forw_lsa: Lsa::default(),
            trid: 0,
            rectype: 0,
            dh: [0; MAX_DATA_HEADER],
            dh_len: 0,
            undo: Payload::default(),
            redo: Payload::default(),
            end: Lsa::default(),
            vol: 0,
        }
    }
}

impl Record {
    pub fn type_name(&self) -> &'static str {
        rectype::type_name(self.rectype).unwrap_or("UNKNOWN")
    }

    /// The raw data header bytes.
    pub fn data_header(&self) -> &[u8] {
        &self.dh[..self.dh_len as usize]
    }

    /// `LOG_DATA.rcvindex` for the types that carry `LOG_DATA`, and the recovery index of
    /// `LOG_DBEXTERN_REDO_DATA`.
    pub fn rcvindex(&self) -> Option<i32> {
        if has_log_data(self.rectype) || self.rectype == LOG_DBEXTERN_REDO_DATA {
            Some(i32_at(&self.dh, 0))
        } else {
            None
        }
    }

    /// An MVCC change of a heap row (user tables; DDL changes the catalog's own rows too).
    pub fn is_mvcc_dml(&self) -> bool {
        use crate::format::rcvindex::{RVHF_MVCC_DELETE_REC_HOME, RVHF_MVCC_INSERT, RVHF_UPDATE_NOTIFY_VACUUM};
        matches!(self.rectype, LOG_MVCC_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA | LOG_MVCC_UNDO_DATA)
            && matches!(self.rcvindex(), Some(RVHF_MVCC_INSERT | RVHF_MVCC_DELETE_REC_HOME | RVHF_UPDATE_NOTIFY_VACUUM))
    }

    /// `(volid, pageid, offset)` of the data page a page update touched.
    pub fn data_page(&self) -> Option<(i16, i32, i16)> {
        has_log_data(self.rectype).then(|| (i16_at(&self.dh, 10), i32_at(&self.dh, 4), i16_at(&self.dh, 8)))
    }

    /// The heap slot a heap-file record addresses, as an OID (the heap manager may OR the flag
    /// `HEAP_RV_FLAG_VACUUM_STATUS_CHANGE` 0x8000 into the slot id; it is masked off).
    pub fn data_oid(&self) -> Option<crate::format::supplemental::Oid> {
        self.data_page().map(|(volid, pageid, offset)| crate::format::supplemental::Oid {
            pageid,
            slotid: offset & 0x7FFF,
            volid,
        })
    }

    pub fn mvccid(&self) -> Option<u64> {
        match self.rectype {
            LOG_MVCC_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA => Some(i64_at(&self.dh, 24) as u64),
            LOG_MVCC_UNDO_DATA | LOG_MVCC_REDO_DATA => Some(i64_at(&self.dh, 16) as u64),
            _ => None,
        }
    }

    /// `SUPPLEMENT_REC_TYPE` of a supplemental record.
    pub fn supplement_type(&self) -> Option<i32> {
        (self.rectype == LOG_SUPPLEMENTAL_INFO).then(|| i32_at(&self.dh, 0))
    }

    /// The raw supplemental length field (zip bit included), as the engine's dump prints it.
    pub fn supplement_raw_length(&self) -> Option<i32> {
        (self.rectype == LOG_SUPPLEMENTAL_INFO).then(|| i32_at(&self.dh, 4))
    }

    /// Wall-clock time (Unix seconds) of commit, abort, commit-with-postpone and HA-state records.
    pub fn at_time(&self) -> Option<i64> {
        match self.rectype {
            LOG_COMMIT | LOG_ABORT => Some(i64_at(&self.dh, 0)),
            LOG_COMMIT_WITH_POSTPONE | LOG_DUMMY_HA_SERVER_STATE => Some(i64_at(&self.dh, 8)),
            _ => None,
        }
    }

    /// `LOG_REC_COMPENSATE.undo_nxlsa`.
    pub fn undo_nxlsa(&self) -> Option<Lsa> {
        (self.rectype == LOG_COMPENSATE).then(|| lsa_at(&self.dh, 16))
    }

    /// `LOG_REC_SYSOP_END.type` of sysop ends (and of the sysop end inside a start-postpone).
    pub fn sysop_type(&self) -> Option<i32> {
        matches!(self.rectype, LOG_SYSOP_END | LOG_SYSOP_START_POSTPONE).then(|| i32_at(&self.dh, 16))
    }

    /// `lastparent_lsa` of a sysop end.
    pub fn sysop_lastparent_lsa(&self) -> Option<Lsa> {
        matches!(self.rectype, LOG_SYSOP_END | LOG_SYSOP_START_POSTPONE).then(|| lsa_at(&self.dh, 0))
    }

    /// `compensate_lsa` of a sysop end of type LOGICAL_COMPENSATE (4): the undo it completes.
    pub fn sysop_compensate_lsa(&self) -> Option<Lsa> {
        (self.sysop_type() == Some(SYSOP_END_LOGICAL_COMPENSATE)).then(|| lsa_at(&self.dh, 32))
    }

    /// Recovery index of a sysop end's logical undo.
    pub fn sysop_undo_rcvindex(&self) -> Option<i32> {
        match self.sysop_type() {
            Some(SYSOP_END_LOGICAL_UNDO) | Some(SYSOP_END_LOGICAL_MVCC_UNDO) => Some(i32_at(&self.dh, 32)),
            _ => None,
        }
    }

    /// `LOG_REC_CHKPT.ntrans` of an END_CHKPT.
    pub fn chkpt_ntrans(&self) -> Option<i32> {
        (self.rectype == LOG_END_CHKPT).then(|| i32_at(&self.dh, 8))
    }

    /// Log bytes from this record's LSA to the next one (headers, payloads, alignment, and the
    /// page headers crossed).
    pub fn size_in_log(&self, page_size: usize) -> u64 {
        let a = self.lsa.pageid * page_size as i64 + self.lsa.offset as i64;
        let b = self.end.pageid * page_size as i64 + self.end.offset as i64;
        (b - a).max(0) as u64
    }
}

/// A position in the log while laying out a record (area offset, may equal the area size).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pos {
    pub pageid: i64,
    pub off: usize,
}

impl Pos {
    pub fn lsa(self) -> Lsa {
        Lsa::new(self.pageid, self.off as i16)
    }
}

/// The writer's placement rules, shared by the reader and the log writer.
pub mod layout {
    use super::{Pos, ALIGNMENT};

    /// ALIGN: round up to 8; at or past the area end, continue at the next page.
    pub fn align(p: Pos, area: usize) -> Pos {
        let off = p.off.div_ceil(ALIGNMENT) * ALIGNMENT;
        if off >= area {
            Pos { pageid: p.pageid + 1, off: 0 }
        } else {
            Pos { pageid: p.pageid, off }
        }
    }

    /// ADVANCE_WHEN_DOES_NOT_FIT: a structure never ends exactly at the area end (`>=`).
    pub fn advance_if_not_fit(p: Pos, len: usize, area: usize) -> Pos {
        if p.off + len >= area {
            Pos { pageid: p.pageid + 1, off: 0 }
        } else {
            p
        }
    }

    /// DATA: a payload of `len` bytes starting at `p` (already aligned). Returns the position
    /// just after its last byte (offset may equal `area`), before the closing ALIGN.
    pub fn data_end(p: Pos, len: u64, area: usize) -> Pos {
        let room = (area - p.off) as u64;
        if len <= room {
            return Pos { pageid: p.pageid, off: p.off + len as usize };
        }
        let rest = len - room;
        let more = rest.div_ceil(area as u64);
        let last = rest - (more - 1) * area as u64;
        Pos { pageid: p.pageid + more as i64, off: last as usize }
    }
}

/// A page that could not be used, and why.
#[derive(Clone, Copy, Debug)]
pub enum PageProblem {
    Encrypted { vol: usize },
    BadChecksum { vol: usize, stored: u32, computed: u32 },
    Absent(Absent),
}

/// Why no record could be read at an LSA. The walker decides which of these end the log and
/// which are errors.
#[derive(Clone, Debug)]
pub enum ParseProblem {
    /// The record's header page, or a page its data header or payload needs, is unusable.
    Page { pageid: i64, problem: PageProblem, header_page: bool },
    /// `LOG_END_OF_LOG` on a page that has not been archived: the end of the log.
    EndMarker,
    /// `LOG_END_OF_LOG` or a NULL `forw_lsa` on an archived page: go on at the next page (as
    /// the engine does); the rest of the page is skipped, and counted (`Walker::unplaced`).
    ArchivedMarker { rectype: i32 },
    /// A NULL `forw_lsa` on an active page (a record the writer never completed).
    NullForward,
    /// Not what the writer writes.
    Invalid(String),
    /// A page could not be read from where it lives (see [`Fetch::Failed`]): an error, never
    /// the end of the log.
    Failed { pageid: i64, error: Box<LogError> },
}

fn fetch_for<S: PageSource + ?Sized>(
    src: &S,
    pageid: i64,
    header_page: bool,
) -> std::result::Result<Page<'_>, ParseProblem> {
    match src.fetch(pageid) {
        Fetch::Ok(p) => Ok(p),
        Fetch::Encrypted(p) => {
            Err(ParseProblem::Page { pageid, problem: PageProblem::Encrypted { vol: p.vol }, header_page })
        }
        Fetch::BadChecksum { page, computed } => Err(ParseProblem::Page {
            pageid,
            problem: PageProblem::BadChecksum { vol: page.vol, stored: page.header.checksum, computed },
            header_page,
        }),
        Fetch::Absent(a) => Err(ParseProblem::Page { pageid, problem: PageProblem::Absent(a), header_page }),
        Fetch::Failed(error) => Err(ParseProblem::Failed { pageid, error }),
    }
}

/// Parses the record that starts at `lsa` in any page source, checking every page it occupies (identity,
/// encryption, checksum) and that its layout ends at its `forw_lsa`.
pub fn parse_record<S: PageSource + ?Sized>(src: &S, lsa: Lsa) -> std::result::Result<Record, ParseProblem> {
    let mut rec = Record::default();
    parse_record_into(src, lsa, &mut rec).map(|()| rec)
}

/// A payload's stored length and whether it is zipped, from its raw length field (None: the
/// sign bit set where the record type never zips, a negative length).
#[inline(always)]
fn stored_length(raw: u32, zips: bool) -> Option<(u32, bool)> {
    match (raw & ZIP_BIT != 0, zips) {
        (true, true) => Some((raw & !ZIP_BIT, true)),
        (true, false) => None,
        (false, _) => Some((raw, false)),
    }
}

/// As [`parse_record`], into `out` (a walker's own record: nothing is moved per record). On an
/// error `out` holds nothing of use.
pub fn parse_record_into<S: PageSource + ?Sized>(
    src: &S,
    lsa: Lsa,
    out: &mut Record,
) -> std::result::Result<(), ParseProblem> {
    let area = src.area_size();
    if lsa.offset < 0
        || !(lsa.offset as usize).is_multiple_of(ALIGNMENT)
        || lsa.offset as usize + RECORD_HEADER_SIZE >= area
    {
        return Err(ParseProblem::Invalid(format!("offset {} cannot hold a record header", lsa.offset)));
    }
    let page = fetch_for(src, lsa.pageid, true)?;
    let base = PAGE_HEADER_SIZE + lsa.offset as usize;
    let h = &page.bytes[base..base + RECORD_HEADER_SIZE];
    let prev_tranlsa = lsa_at(h, PREV_TRANLSA_AT);
    let back_lsa = lsa_at(h, BACK_LSA_AT);
    let forw_lsa = lsa_at(h, FORW_LSA_AT);
    let trid = i32_at(h, TRID_AT);
    let rectype = i32_at(h, TYPE_AT);

    if rectype == LOG_END_OF_LOG || forw_lsa.is_null() {
        if page.archived {
            return Err(ParseProblem::ArchivedMarker { rectype });
        }
        return Err(if rectype == LOG_END_OF_LOG { ParseProblem::EndMarker } else { ParseProblem::NullForward });
    }
    let Some(dh_len) = data_header_size(rectype) else {
        return Err(ParseProblem::Invalid(format!("unknown record type {rectype}")));
    };
    if forw_lsa <= lsa {
        return Err(ParseProblem::Invalid(format!("forw_lsa {forw_lsa} does not lie after the record")));
    }

    let mut pos = layout::align(Pos { pageid: lsa.pageid, off: lsa.offset as usize + RECORD_HEADER_SIZE }, area);
    // Only `dh[..dh_len]` is ever read: what an earlier record left after it is not cleared.
    let dh = &mut out.dh;
    // Highest page verified so far; payload pages after it are fetched (and so checked).
    let mut checked = lsa.pageid;
    // The last page fetched (a payload usually starts on it).
    let mut held = (lsa.pageid, page);
    if dh_len > 0 {
        pos = layout::advance_if_not_fit(pos, dh_len, area);
        let dpage = if pos.pageid == lsa.pageid { page } else { fetch_for(src, pos.pageid, false)? };
        held = (pos.pageid, dpage);
        checked = pos.pageid;
        let s = PAGE_HEADER_SIZE + pos.off;
        dh[..dh_len].copy_from_slice(&dpage.bytes[s..s + dh_len]);
        pos = layout::align(Pos { pageid: pos.pageid, off: pos.off + dh_len }, area);
    }

    let (u_raw, r_raw) = raw_payload_lengths(rectype, &dh[..dh_len]);
    let zips = may_zip(rectype);
    let (Some((u_len, u_zip)), Some((r_len, r_zip))) = (stored_length(u_raw, zips), stored_length(r_raw, zips)) else {
        let raw = if stored_length(u_raw, zips).is_none() { u_raw } else { r_raw };
        return Err(ParseProblem::Invalid(format!("negative payload length {}", raw as i32)));
    };
    // A length no volume set can hold is a lie; reject it before touching any page.
    let limit = src.total_bytes();
    if u_len as u64 + r_len as u64 > limit {
        return Err(ParseProblem::Invalid(format!(
            "payload lengths {u_len} + {r_len} exceed the {limit} bytes of the whole log set"
        )));
    }

    let record_vol = page.vol as u16;
    // Where each payload starts, and the last page a payload byte lies on: the pages past those
    // already checked are fetched (and so checked) once both are placed.
    let mut reach = checked;
    let mut place = |len: u32, zipped: bool, pos: &mut Pos| -> Payload {
        let start = *pos;
        if len > 0 {
            let end = layout::data_end(start, len as u64, area);
            reach = reach.max(end.pageid);
            *pos = layout::align(end, area);
        }
        Payload { start: start.lsa(), record: lsa, record_vol, stored_len: len, zipped, prefix: None }
    };
    let mut undo = place(u_len, u_zip, &mut pos);
    let mut redo = place(r_len, r_zip, &mut pos);
    for p in [&mut undo, &mut redo] {
        let Ok(at) = usize::try_from(p.start.offset) else { continue };
        if p.zipped && p.stored_len >= 4 && at + 4 <= area && p.start.pageid == held.0 {
            p.prefix = Some(u32_at(held.1.bytes, PAGE_HEADER_SIZE + at));
        }
    }
    for p in checked + 1..=reach {
        fetch_for(src, p, false)?;
    }
    let next = layout::advance_if_not_fit(layout::align(pos, area), RECORD_HEADER_SIZE, area);
    let end = next.lsa();
    if end != forw_lsa {
        return Err(ParseProblem::Invalid(format!("forw_lsa is {forw_lsa}, but the record's layout ends at {end}")));
    }
    out.lsa = lsa;
    out.prev_tranlsa = prev_tranlsa;
    out.back_lsa = back_lsa;
    out.forw_lsa = forw_lsa;
    out.trid = trid;
    out.rectype = rectype;
    out.dh_len = dh_len as u8;
    out.undo = undo;
    out.redo = redo;
    out.end = end;
    out.vol = page.vol as u16;
    Ok(())
}

#[cfg(test)]
impl crate::log::logset::LogSet {
    /// A page a record needs, or the parse problem its absence is.
    pub(crate) fn fetch_for(&self, pageid: i64, header_page: bool) -> std::result::Result<Page<'_>, ParseProblem> {
        fetch_for(self, pageid, header_page)
    }
}

/// Records of a whole log, as methods: every [`LogSource`] has them.
pub trait ReadRecords: LogSource {
    /// Parses the record that starts at `lsa` (see [`parse_record`]).
    fn parse_record(&self, lsa: Lsa) -> std::result::Result<Record, ParseProblem> {
        parse_record(self, lsa)
    }

    /// Random access: the record at `lsa`, or a typed error.
    fn record_at(&self, lsa: Lsa) -> Result<Record> {
        self.count_random_read();
        self.parse_record(lsa).map_err(|p| match p {
            // A page the log has not reached yet: the LSA lies past the end, not in a bad log.
            ParseProblem::Page {
                problem: PageProblem::Absent(Absent::Overwritten { .. } | Absent::NoVolume),
                header_page: true,
                ..
            } if self.header().is_some_and(|h| lsa.pageid > h.append_lsa.pageid) => LogError::BadPosition {
                file: self.set_name(),
                lsa,
                msg: format!("LSA {lsa} lies beyond the end of the log"),
            },
            p => self.problem_error(p, lsa),
        })
    }

    /// The error a parse problem means when it is not the end of the log.
    fn problem_error(&self, p: ParseProblem, lsa: Lsa) -> LogError {
        let file = |vol: usize| self.volume_name(vol).to_string();
        let header_vol = || match self.fetch(lsa.pageid) {
            Fetch::Ok(p) | Fetch::Encrypted(p) => p.vol,
            Fetch::BadChecksum { page, .. } => page.vol,
            Fetch::Absent(_) | Fetch::Failed(_) => self.active_volume().unwrap_or(0),
        };
        match p {
            ParseProblem::Page { pageid, problem, header_page } => match problem {
                PageProblem::Encrypted { vol } => LogError::Encrypted { file: file(vol), lsa: Some(lsa), pageid },
                PageProblem::BadChecksum { vol, stored, computed } => {
                    LogError::Checksum { file: file(vol), lsa: Some(lsa), pageid, stored, computed }
                }
                PageProblem::Absent(Absent::ArchiveMissing) => {
                    self.fetch_error(Fetch::Absent(Absent::ArchiveMissing), pageid, lsa)
                }
                PageProblem::Absent(a) if header_page || matches!(a, Absent::Damaged { .. }) => {
                    self.fetch_error(Fetch::Absent(a), pageid, lsa)
                }
                PageProblem::Absent(_) => LogError::Truncated {
                    file: file(header_vol()),
                    lsa: Some(lsa),
                    msg: format!("the record continues on log page {pageid}, which is not in the set"),
                },
            },
            ParseProblem::EndMarker => LogError::BadPosition {
                file: file(header_vol()),
                lsa,
                msg: format!("LSA {lsa} is the end of the log, not a record"),
            },
            ParseProblem::ArchivedMarker { .. } | ParseProblem::NullForward => {
                LogError::corrupt(&file(header_vol()), lsa, "record with a NULL forw_lsa (never completed)")
            }
            ParseProblem::Invalid(msg) => LogError::corrupt(&file(header_vol()), lsa, msg),
            ParseProblem::Failed { pageid, error } => error.at(lsa, pageid),
        }
    }
}

impl<S: LogSource + ?Sized> ReadRecords for S {}
