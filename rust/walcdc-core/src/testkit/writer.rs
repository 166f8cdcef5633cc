//! A log writer: builds CUBRID-format log sets (active volume + archives) that look like the
//! state after a clean shutdown. Used for property tests, robustness tests and benchmark data.
//!
//! Records are laid out with the same placement functions the reader uses
//! ([`crate::log::record::layout`]), so writer and reader cannot drift apart silently: the tests
//! below walk every written log with the reader and compare record by record.
//!
//! [`LogWriter::new`] keeps every page in memory until [`LogWriter::finish`], which decides
//! what is archived and which pages stay in the active ring, sets the checksums and writes the
//! files. [`LogWriter::streaming`] writes each archive as soon as it is certain to be one (the
//! append position is a ring's length past it) and drops the pages no later ring can hold, so
//! it holds about a ring and an archive in memory however large the log grows; the files are
//! the same either way (an archive's header names the next trid of when it became certain,
//! as the engine's name the one of when they were written).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::format::le::{i32_at, lsa_at};
use crate::format::lsa::Lsa;
use crate::format::page::{set_checksum, PageHeader, HEADER_PAGE_ID, PAGE_HEADER_SIZE};
use crate::format::rectype::*;
use crate::log::logset::{ACTIVE_HEADER_SIZE, ACTIVE_MAGIC, ARCHIVE_MAGIC, VALID_PAGE_SIZES};
use crate::log::payload::{undo_diff, zip};
use crate::log::record::layout::{advance_if_not_fit, align, data_end};
use crate::log::record::{Pos, BACK_LSA_AT, FORW_LSA_AT, RECORD_HEADER_SIZE, TRID_AT, TYPE_AT};

const ZIP_BIT: u32 = 0x8000_0000;
/// `LOG_PAGE_INIT_VALUE`: new pages, and the gaps the layout rules skip, hold 0xFF.
const FILL: u8 = 0xFF;
/// `sizeof(LOG_INFO_CHKPT_TRANS)` and `sizeof(LOG_INFO_CHKPT_SYSOP)`.
const CHKPT_TRANS_SIZE: usize = 112;
const CHKPT_SYSOP_SIZE: usize = 24;
/// `sizeof(LK_ACQOBJ_LOCK)`, the element of a 2PC prepare's redo slot.
const OBJ_LOCK_SIZE: usize = 20;
/// `MVCCID_FIRST`: the lowest `mvcc_next_id` a database has.
const MVCCID_FIRST: u64 = 4;
/// Disk compatibility level of 11.4 (`LOG_HEADER.db_compatibility`).
const DB_COMPATIBILITY: f32 = 11.4;

/// Shape of the log set to write.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    /// Log page size: 4096, 8192 or 16384.
    pub page_size: usize,
    /// Ring size N (`LOG_HEADER.npages`): data pages of the active volume.
    pub active_pages: i32,
    /// Pages per archive volume (at most `active_pages`, as the engine never archives more than
    /// a ring's worth at once).
    pub archive_pages: i64,
    pub db_creation: i64,
    /// File name prefix (the database name); at most 17 bytes.
    pub prefix: String,
    /// `LOG_HEADER.db_release`, e.g. "11.4.0"; at most 14 bytes.
    pub release: String,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            page_size: 4096,
            active_pages: 64,
            archive_pages: 16,
            db_creation: 1_700_000_000,
            prefix: "walcdc".into(),
            release: "11.4.0".into(),
        }
    }
}

/// Per-type data-header fields a caller may set; lengths are always filled in by the writer.
///
/// `lsa` is the one LSA field of the type: `undo_nxlsa` (COMPENSATE), `ref_lsa` (RUN_POSTPONE),
/// `lastparent_lsa` (SYSOP_END, SYSOP_START_POSTPONE), `prv_savept` (SAVEPOINT), `posp_lsa`
/// (COMMIT_WITH_POSTPONE[_OBSOLETE]), `redo_lsa` (END_CHKPT), `lsa` (REPLICATION_*).
/// `None` writes NULL.
#[derive(Clone, Debug, Default)]
pub struct DataFields {
    pub rcvindex: i32,
    pub volid: i16,
    pub pageid: i32,
    pub offset: i16,
    pub mvccid: u64,
    pub supplement_type: i32,
    pub at_time: i64,
    pub lsa: Option<Lsa>,
    pub sysop_type: i32,
    pub ha_state: i32,
}

/// What [`LogWriter::finish`] wrote.
#[derive(Clone, Debug)]
pub struct WrittenLog {
    pub active: PathBuf,
    pub archives: Vec<PathBuf>,
    /// The END_OF_LOG marker's LSA (= header `append_lsa`).
    pub end_lsa: Lsa,
    /// LSAs of the appended records, in order.
    pub records: Vec<Lsa>,
}

/// Builds a log in memory, record by record.
pub struct LogWriter {
    cfg: WriterConfig,
    area: usize,
    /// Logical pages `base`.. back to back, `page_size` bytes each.
    buf: Vec<u8>,
    /// The first logical page in `buf` (pages before it were written out and dropped).
    base: i64,
    /// Where a streaming writer writes its archives, and those written so far.
    stream: Option<(PathBuf, Vec<PathBuf>)>,
    /// The next trid when each archive became certain (what its header records, as in the
    /// engine, whose archives are written then).
    archive_trids: Vec<i32>,
    /// Append position: where the next record header goes.
    pos: Pos,
    last_lsa: Lsa,
    tran_last: HashMap<i32, Lsa>,
    records: Vec<Lsa>,
    max_trid: i32,
    max_mvccid: u64,
    /// Live writing ([`LogWriter::flush`]): the first page the next flush writes (the page of
    /// the last flush's end marker, which the next records fill further).
    flushed_from: i64,
    /// Flushed at least once: archives are then written by `flush`, as the engine archives
    /// flushed pages.
    live: bool,
}

/// Whether two paths name the same directory (`out` and `./out` do).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// Which payload slots (undo, redo) a record type has. For sysop ends the undo slot exists only
/// for a logical undo.
fn slots(t: i32, sysop_type: i32) -> (bool, bool) {
    match t {
        LOG_UNDOREDO_DATA
        | LOG_DIFF_UNDOREDO_DATA
        | LOG_MVCC_UNDOREDO_DATA
        | LOG_MVCC_DIFF_UNDOREDO_DATA
        | LOG_END_CHKPT
        | LOG_2PC_PREPARE => (true, true),
        LOG_UNDO_DATA
        | LOG_MVCC_UNDO_DATA
        | LOG_RUN_POSTPONE
        | LOG_COMPENSATE
        | LOG_SAVEPOINT
        | LOG_REPLICATION_DATA
        | LOG_REPLICATION_STATEMENT
        | LOG_SUPPLEMENTAL_INFO
        | LOG_2PC_START => (true, false),
        LOG_REDO_DATA | LOG_MVCC_REDO_DATA | LOG_POSTPONE | LOG_DBEXTERN_REDO_DATA => (false, true),
        LOG_SYSOP_END | LOG_SYSOP_START_POSTPONE => {
            (sysop_type == SYSOP_END_LOGICAL_UNDO || sysop_type == SYSOP_END_LOGICAL_MVCC_UNDO, false)
        }
        _ => (false, false),
    }
}

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}
fn put_lsa(b: &mut [u8], off: usize, l: Lsa) {
    put(b, off, &l.to_raw().to_le_bytes());
}

/// The data header of type `t`. `u`/`r` are the stored length fields (zip bit included);
/// unused bytes stay zero.
fn data_header(t: i32, f: &DataFields, u: u32, r: u32, u_len: usize, r_len: usize) -> [u8; MAX_DATA_HEADER] {
    let mut d = [0u8; MAX_DATA_HEADER];
    let lsa = f.lsa.unwrap_or(Lsa::NULL);
    if has_log_data(t) {
        put(&mut d, 0, &f.rcvindex.to_le_bytes());
        put(&mut d, 4, &f.pageid.to_le_bytes());
        put(&mut d, 8, &f.offset.to_le_bytes());
        put(&mut d, 10, &f.volid.to_le_bytes());
    }
    match t {
        LOG_UNDOREDO_DATA | LOG_DIFF_UNDOREDO_DATA | LOG_MVCC_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA => {
            put(&mut d, 12, &u.to_le_bytes());
            put(&mut d, 16, &r.to_le_bytes());
            if t == LOG_MVCC_UNDOREDO_DATA || t == LOG_MVCC_DIFF_UNDOREDO_DATA {
                put(&mut d, 24, &f.mvccid.to_le_bytes());
            }
        }
        LOG_UNDO_DATA | LOG_MVCC_UNDO_DATA => {
            put(&mut d, 12, &u.to_le_bytes());
            if t == LOG_MVCC_UNDO_DATA {
                put(&mut d, 16, &f.mvccid.to_le_bytes());
            }
        }
        LOG_REDO_DATA | LOG_POSTPONE | LOG_MVCC_REDO_DATA => {
            put(&mut d, 12, &r.to_le_bytes());
            if t == LOG_MVCC_REDO_DATA {
                put(&mut d, 16, &f.mvccid.to_le_bytes());
            }
        }
        LOG_DBEXTERN_REDO_DATA => {
            put(&mut d, 0, &f.rcvindex.to_le_bytes());
            put(&mut d, 4, &r.to_le_bytes());
        }
        LOG_RUN_POSTPONE | LOG_COMPENSATE => {
            put_lsa(&mut d, 16, lsa);
            put(&mut d, 24, &u.to_le_bytes());
        }
        LOG_COMMIT_WITH_POSTPONE => {
            put_lsa(&mut d, 0, lsa);
            put(&mut d, 8, &f.at_time.to_le_bytes());
        }
        LOG_COMMIT_WITH_POSTPONE_OBSOLETE => put_lsa(&mut d, 0, lsa),
        LOG_COMMIT | LOG_ABORT => put(&mut d, 0, &f.at_time.to_le_bytes()),
        LOG_SYSOP_END | LOG_SYSOP_START_POSTPONE => {
            put_lsa(&mut d, 0, lsa);
            put_lsa(&mut d, 8, Lsa::NULL); // prv_topresult_lsa
            put(&mut d, 16, &f.sysop_type.to_le_bytes());
            if f.sysop_type == SYSOP_END_LOGICAL_UNDO || f.sysop_type == SYSOP_END_LOGICAL_MVCC_UNDO {
                // The embedded LOG_REC_UNDO of a logical undo: no data page.
                put(&mut d, 32, &f.rcvindex.to_le_bytes());
                put(&mut d, 36, &(-1i32).to_le_bytes());
                put(&mut d, 40, &(-1i16).to_le_bytes());
                put(&mut d, 42, &(-1i16).to_le_bytes());
                put(&mut d, 44, &u.to_le_bytes());
                if f.sysop_type == SYSOP_END_LOGICAL_MVCC_UNDO {
                    put(&mut d, 48, &f.mvccid.to_le_bytes());
                }
            }
            if t == LOG_SYSOP_START_POSTPONE {
                put_lsa(&mut d, 72, Lsa::NULL); // posp_lsa
            }
        }
        LOG_END_CHKPT => {
            put_lsa(&mut d, 0, lsa);
            put(&mut d, 8, &((u_len / CHKPT_TRANS_SIZE) as i32).to_le_bytes());
            put(&mut d, 12, &((r_len / CHKPT_SYSOP_SIZE) as i32).to_le_bytes());
        }
        LOG_SAVEPOINT => {
            put_lsa(&mut d, 0, lsa);
            put(&mut d, 8, &u.to_le_bytes());
        }
        LOG_REPLICATION_DATA | LOG_REPLICATION_STATEMENT => {
            put_lsa(&mut d, 0, lsa);
            put(&mut d, 8, &u.to_le_bytes());
            put(&mut d, 12, &f.rcvindex.to_le_bytes());
        }
        LOG_2PC_PREPARE => {
            put(&mut d, 40, &u.to_le_bytes()); // gtrinfo_length
            put(&mut d, 44, &((r_len / OBJ_LOCK_SIZE) as u32).to_le_bytes());
        }
        LOG_2PC_START => {
            // One participant whose id is the whole payload (num_particps × particp_id_length).
            put(&mut d, 40, &i32::from(u_len > 0).to_le_bytes());
            put(&mut d, 44, &u.to_le_bytes());
        }
        LOG_DUMMY_HA_SERVER_STATE => {
            put(&mut d, 0, &f.ha_state.to_le_bytes());
            put(&mut d, 8, &f.at_time.to_le_bytes());
        }
        LOG_SUPPLEMENTAL_INFO => {
            put(&mut d, 0, &f.supplement_type.to_le_bytes());
            put(&mut d, 4, &u.to_le_bytes());
        }
        _ => {}
    }
    d
}

/// A stored payload and its length field.
fn encode(data: &[u8], want_zip: bool) -> (Cow<'_, [u8]>, bool) {
    if want_zip {
        if let Some(z) = zip(data) {
            return (Cow::Owned(z), true);
        }
    }
    (Cow::Borrowed(data), false)
}

fn length_field(stored: &[u8], zipped: bool) -> Result<u32, String> {
    let n = u32::try_from(stored.len()).ok().filter(|&n| n < ZIP_BIT).ok_or("payload longer than 2^31 - 1 bytes")?;
    Ok(if zipped { n | ZIP_BIT } else { n })
}

impl LogWriter {
    pub fn new(cfg: WriterConfig) -> Result<LogWriter, String> {
        if !VALID_PAGE_SIZES.contains(&cfg.page_size) {
            return Err(format!("page size {} is not 4096, 8192 or 16384", cfg.page_size));
        }
        if cfg.active_pages < 2 {
            return Err(format!("active_pages = {}: the ring needs at least 2 pages", cfg.active_pages));
        }
        // Archives beyond the ring's size would have to hold pages not written yet.
        if cfg.archive_pages < 1 || cfg.archive_pages > cfg.active_pages as i64 {
            return Err(format!("archive_pages = {} must lie in 1..={}", cfg.archive_pages, cfg.active_pages));
        }
        if cfg.prefix.is_empty() || cfg.prefix.len() > 17 || cfg.prefix.contains(['/', '\0']) {
            return Err(format!("prefix {:?} must be 1..17 bytes, without '/' or NUL", cfg.prefix));
        }
        if cfg.release.len() > 14 || cfg.release.contains('\0') {
            return Err(format!("release {:?} must be at most 14 bytes", cfg.release));
        }
        let area = cfg.page_size - PAGE_HEADER_SIZE;
        Ok(LogWriter {
            cfg,
            area,
            buf: Vec::new(),
            base: 0,
            stream: None,
            archive_trids: Vec::new(),
            pos: Pos { pageid: 0, off: 0 },
            last_lsa: Lsa::NULL,
            tran_last: HashMap::new(),
            records: Vec::new(),
            max_trid: 0,
            max_mvccid: 0,
            flushed_from: 0,
            live: false,
        })
    }

    /// A writer that writes archives into `dir` as it goes (see the module docs); its memory
    /// does not grow with the log, and it keeps no list of record LSAs.
    pub fn streaming(cfg: WriterConfig, dir: &Path) -> Result<LogWriter, String> {
        let mut w = LogWriter::new(cfg)?;
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        w.stream = Some((dir.to_path_buf(), Vec::new()));
        Ok(w)
    }

    /// Bytes of pages held in memory.
    pub fn buffered_bytes(&self) -> usize {
        self.buf.len()
    }

    pub fn config(&self) -> &WriterConfig {
        &self.cfg
    }

    /// `LOGAREA_SIZE`: bytes of a page after its header.
    pub fn area_size(&self) -> usize {
        self.area
    }

    /// Where the next record would go.
    pub fn end_lsa(&self) -> Lsa {
        self.pos.lsa()
    }

    /// Makes logical pages up to `pageid` exist: 0xFF-filled, with page header {pageid, -1, 0}.
    fn ensure_page(&mut self, pageid: i64) {
        let ps = self.cfg.page_size;
        while self.base + (self.buf.len() / ps) as i64 <= pageid {
            let id = self.base + (self.buf.len() / ps) as i64;
            let start = self.buf.len();
            self.buf.resize(start + ps, FILL);
            let p = &mut self.buf[start..];
            put(p, 0, &id.to_le_bytes());
            put(p, 8, &(-1i16).to_le_bytes());
            put(p, 10, &0i16.to_le_bytes());
        }
    }

    /// Area bytes of page `pageid` from `off` (page must exist).
    fn area_mut(&mut self, pageid: i64, off: usize, len: usize) -> &mut [u8] {
        let s = (pageid - self.base) as usize * self.cfg.page_size + PAGE_HEADER_SIZE + off;
        &mut self.buf[s..s + len]
    }

    /// Writes a record header at `at`; the first one in a page also sets the page's `offset`.
    fn put_record_header(&mut self, at: Pos, prev: Lsa, back: Lsa, forw: Lsa, trid: i32, t: i32) {
        self.ensure_page(at.pageid);
        let page = (at.pageid - self.base) as usize * self.cfg.page_size;
        if i16::from_le_bytes([self.buf[page + 8], self.buf[page + 9]]) == -1 {
            put(&mut self.buf[page..], 8, &(at.off as i16).to_le_bytes());
        }
        let h = self.area_mut(at.pageid, at.off, RECORD_HEADER_SIZE);
        put_lsa(h, 0, prev);
        put_lsa(h, 8, back);
        put_lsa(h, 16, forw);
        put(h, 24, &trid.to_le_bytes());
        put(h, 28, &t.to_le_bytes());
    }

    /// DATA rule: copies a payload from `p` (aligned), filling every page to its last byte.
    /// Returns the position after the payload, closing ALIGN applied.
    fn put_data(&mut self, mut p: Pos, data: &[u8]) -> Pos {
        if data.is_empty() {
            return p; // zero-length payloads take no room and no alignment
        }
        let end = data_end(p, data.len() as u64, self.area);
        self.ensure_page(end.pageid);
        let mut rest = data;
        while !rest.is_empty() {
            if p.off == self.area {
                p = Pos { pageid: p.pageid + 1, off: 0 };
            }
            let k = rest.len().min(self.area - p.off);
            self.area_mut(p.pageid, p.off, k).copy_from_slice(&rest[..k]);
            p.off += k;
            rest = &rest[k..];
        }
        debug_assert_eq!(p, end);
        align(end, self.area)
    }

    /// Appends one record following the placement rules of spec §5.3; returns its LSA.
    ///
    /// `zip_undo`/`zip_redo` store that payload LZ4-zipped when the type allows it and zipping
    /// makes it smaller. DIFF types (43, 49) take the undo and redo *images*: the redo is stored
    /// as zip(redo XOR undo) and must compress. Types without a payload slot refuse payloads.
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        trid: i32,
        rectype: i32,
        fields: &DataFields,
        undo: &[u8],
        redo: &[u8],
        zip_undo: bool,
        zip_redo: bool,
    ) -> Result<Lsa, String> {
        let name = type_name(rectype).unwrap_or("?");
        let dh_len = match data_header_size(rectype) {
            Some(_) if rectype == LOG_END_OF_LOG => return Err("LOG_END_OF_LOG is written by finish()".into()),
            Some(n) => n,
            None => return Err(format!("record type {rectype} is not one the engine writes")),
        };
        let (has_undo, has_redo) = slots(rectype, fields.sysop_type);
        if !has_undo && !undo.is_empty() {
            return Err(format!("{name} (sysop type {}) has no undo payload slot", fields.sysop_type));
        }
        if !has_redo && !redo.is_empty() {
            return Err(format!("{name} has no redo payload slot"));
        }
        // Counted arrays: the header stores counts, so the payloads must be whole elements.
        // (`%`, not `is_multiple_of`: the workspace's rust-version is 1.80.)
        #[allow(clippy::manual_is_multiple_of)]
        let whole = |len: usize, size: usize, what: &str| {
            if len % size == 0 {
                Ok(())
            } else {
                Err(format!("{name}: {what} of {len} bytes is not a multiple of {size}"))
            }
        };
        match rectype {
            LOG_END_CHKPT => {
                whole(undo.len(), CHKPT_TRANS_SIZE, "transaction table")?;
                whole(redo.len(), CHKPT_SYSOP_SIZE, "sysop table")?;
            }
            LOG_2PC_PREPARE => whole(redo.len(), OBJ_LOCK_SIZE, "lock table")?,
            _ => {}
        }

        let zips = may_zip(rectype);
        let (u_stored, u_zip) = encode(undo, zips && zip_undo);
        let (r_stored, r_zip) = if is_diff(rectype) {
            let mut d = redo.to_vec();
            undo_diff(undo, &mut d);
            let z = zip(&d)
                .ok_or_else(|| format!("{name}: redo XOR undo does not compress; a DIFF redo is always zipped"))?;
            (Cow::Owned(z), true)
        } else {
            encode(redo, zips && zip_redo)
        };
        let u_field = length_field(&u_stored, u_zip)?;
        let r_field = length_field(&r_stored, r_zip)?;
        let dh = data_header(rectype, fields, u_field, r_field, undo.len(), redo.len());

        // Steps 1–7 of §5.3.
        let area = self.area;
        let at = advance_if_not_fit(self.pos, RECORD_HEADER_SIZE, area);
        let mut p = align(Pos { pageid: at.pageid, off: at.off + RECORD_HEADER_SIZE }, area);
        if dh_len > 0 {
            p = advance_if_not_fit(p, dh_len, area);
            self.ensure_page(p.pageid);
            self.area_mut(p.pageid, p.off, dh_len).copy_from_slice(&dh[..dh_len]);
            p = align(Pos { pageid: p.pageid, off: p.off + dh_len }, area);
        }
        p = self.put_data(p, &u_stored);
        p = self.put_data(p, &r_stored);
        let next = advance_if_not_fit(align(p, area), RECORD_HEADER_SIZE, area);

        let lsa = at.lsa();
        let prev = self.tran_last.insert(trid, lsa).unwrap_or(Lsa::NULL);
        // A transaction ends at its commit or abort: a trid used again starts a new chain.
        if rectype == LOG_COMMIT || rectype == LOG_ABORT {
            self.tran_last.remove(&trid);
        }
        self.put_record_header(at, prev, self.last_lsa, next.lsa(), trid, rectype);
        self.last_lsa = lsa;
        self.pos = next;
        if self.stream.is_none() {
            self.records.push(lsa);
        }
        self.max_trid = self.max_trid.max(trid);
        let carries_mvccid = matches!(
            rectype,
            LOG_MVCC_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA | LOG_MVCC_UNDO_DATA | LOG_MVCC_REDO_DATA
        ) || (matches!(rectype, LOG_SYSOP_END | LOG_SYSOP_START_POSTPONE)
            && fields.sysop_type == SYSOP_END_LOGICAL_MVCC_UNDO);
        if carries_mvccid {
            self.max_mvccid = self.max_mvccid.max(fields.mvccid);
        }
        self.write_certain_archives().map_err(|e| format!("writing an archive: {e}"))?;
        Ok(lsa)
    }

    /// Notes the archives whatever follows will make archives (those a ring's length behind
    /// the append position); streaming, writes them and drops the pages no final ring holds.
    fn write_certain_archives(&mut self) -> io::Result<()> {
        let (n, k) = (self.cfg.active_pages as i64, self.cfg.archive_pages);
        let last = self.pos.pageid;
        // Archive i is certain once the ring cannot hold everything from its first page on.
        while last + 1 - n > self.archive_trids.len() as i64 * k {
            self.archive_trids.push(self.max_trid.saturating_add(1).max(1));
        }
        if self.live {
            return Ok(()); // written by `flush`, from flushed pages, before their slots are reused
        }
        self.write_archives(self.archive_trids.len() as i64)
    }

    /// Streaming: writes the certain archives below number `upto` not written yet, and drops
    /// the pages no later ring or archive needs.
    fn write_archives(&mut self, upto: i64) -> io::Result<()> {
        let (n, k) = (self.cfg.active_pages as i64, self.cfg.archive_pages);
        let last = self.pos.pageid;
        let Some((dir, written)) = &self.stream else { return Ok(()) };
        let dir = dir.clone();
        let mut i = written.len() as i64;
        while i < upto.min(self.archive_trids.len() as i64) {
            let file = self.archive_file(i, self.archive_trids[i as usize]);
            let path = dir.join(format!("{}_lgar{i:03}", self.cfg.prefix));
            // Written whole under a temporary name, then renamed (as the engine's background
            // archiving does with `<db>_lgar_t`): a reader never sees half an archive.
            let tmp = dir.join(format!("{}_lgar_t", self.cfg.prefix));
            fs::write(&tmp, &file)?;
            fs::rename(&tmp, &path)?;
            self.stream.as_mut().expect("streaming").1.push(path);
            i += 1;
        }
        let keep_from = (i * k).min(last - n + 1);
        // Dropped an archive's worth at a time: draining the front of the buffer moves the
        // rest, which page by page would cost a ring's bytes per page.
        if keep_from >= self.base + k {
            let drop = (keep_from - self.base) as usize * self.cfg.page_size;
            self.buf.drain(..drop);
            self.base = keep_from;
        }
        Ok(())
    }

    /// Archive volume `i`: its header page, then its `k` pages (checksums set).
    fn archive_file(&self, i: i64, next_trid: i32) -> Vec<u8> {
        let (ps, k) = (self.cfg.page_size, self.cfg.archive_pages);
        let mut file = vec![FILL; ps * (k as usize + 1)];
        let h = header_page(&mut file[..ps]);
        put(h, 0, ARCHIVE_MAGIC);
        h[ARCHIVE_MAGIC.len()..25].fill(0);
        put(h, 32, &self.cfg.db_creation.to_le_bytes());
        put(h, 40, &next_trid.to_le_bytes());
        put(h, 44, &(k as i32).to_le_bytes());
        put(h, 48, &(i * k).to_le_bytes());
        put(h, 56, &(i as i32).to_le_bytes());
        set_checksum(&mut file[..ps]);
        for j in 0..k {
            let dst = (j as usize + 1) * ps;
            let src = (i * k + j - self.base) as usize * ps;
            file[dst..dst + ps].copy_from_slice(&self.buf[src..src + ps]);
            set_checksum(&mut file[dst..dst + ps]);
        }
        file
    }

    /// Writes `<dir>/<prefix>_lgat` and the archives `<prefix>_lgarNNN`, as after a clean
    /// shutdown: END_OF_LOG marker at the append position, header `append_lsa` = `chkpt_lsa` =
    /// `eof_lsa` = that marker.
    pub fn finish(mut self, dir: &Path) -> io::Result<WrittenLog> {
        let ps = self.cfg.page_size;
        let n = self.cfg.active_pages as i64;
        let k = self.cfg.archive_pages;
        let end = self.pos;
        let next_trid = self.max_trid.saturating_add(1).max(1);
        // The marker is not a record: written at the append position without advancing. It
        // also sets the page's offset, so a log without records still names a first header.
        self.put_record_header(end, Lsa::NULL, self.last_lsa, Lsa::NULL, next_trid, LOG_END_OF_LOG);
        for page in self.buf.chunks_exact_mut(ps) {
            set_checksum(page);
        }

        // Archive whole volumes of k pages as long as the ring (N pages ending at `last`) could
        // not hold everything from the first unarchived page on. Since k <= N, archived pages
        // all lie before `last`, so they are complete.
        let last = end.pageid;
        let m = if last + 1 > n { (last + 1 - n + k - 1) / k } else { 0 };
        let nxarv = m * k;
        let fpageid = (last / n) * n;
        let slot = |p: i64| (p - fpageid).rem_euclid(n) + 1;

        fs::create_dir_all(dir)?;
        let prefix = self.cfg.prefix.clone();
        let mut archives = match self.stream.take() {
            Some((streamed_to, written)) if same_dir(&streamed_to, dir) => written,
            Some((streamed_to, _)) => {
                return Err(io::Error::other(format!(
                    "a streaming writer finishes where it wrote its archives ({}), not in {}",
                    streamed_to.display(),
                    dir.display()
                )))
            }
            None => Vec::new(),
        };
        for i in archives.len() as i64..m {
            let file = self.archive_file(i, self.archive_trids.get(i as usize).copied().unwrap_or(next_trid));
            let path = dir.join(format!("{prefix}_lgar{i:03}"));
            fs::write(&path, &file)?;
            archives.push(path);
        }
        let base = self.base;
        let page = |p: i64| &self.buf[(p - base) as usize * ps..(p - base + 1) as usize * ps];

        // Active volume: header page, then the ring. Slots never written keep fileio_format's
        // pattern (14 bytes 0xFF, zeros, last 8 bytes 0xFF), which fails the identity check.
        let mut file = vec![0u8; ps * (n as usize + 1)];
        for s in 1..=n as usize {
            let slot_page = &mut file[s * ps..(s + 1) * ps];
            slot_page[..14].fill(FILL);
            slot_page[ps - 8..].fill(FILL);
        }
        let end_lsa = end.lsa();
        file[..ps].copy_from_slice(&self.active_header(end_lsa, next_trid, nxarv, m, fpageid, true));
        for p in (last - n + 1).max(0)..=last {
            let dst = slot(p) as usize * ps;
            file[dst..dst + ps].copy_from_slice(page(p));
        }
        let active = dir.join(format!("{prefix}_lgat"));
        fs::write(&active, &file)?;

        Ok(WrittenLog { active, archives, end_lsa, records: self.records })
    }
}

impl LogWriter {
    /// The active volume's header page (`LOG_HEADER`, checksum set) for a log whose append
    /// position is `end_lsa`; `shutdown`: as after a clean shutdown (else as a running server's).
    fn active_header(&self, end_lsa: Lsa, next_trid: i32, nxarv: i64, m: i64, fpageid: i64, shutdown: bool) -> Vec<u8> {
        let (ps, n) = (self.cfg.page_size, self.cfg.active_pages as i64);
        let slot = |p: i64| (p - fpageid).rem_euclid(n) + 1;
        let mut page = vec![FILL; ps];
        let h = header_page(&mut page);
        h[..ACTIVE_HEADER_SIZE].fill(0);
        put(h, 0, ACTIVE_MAGIC);
        put(h, 32, &self.cfg.db_creation.to_le_bytes());
        put(h, 40, self.cfg.release.as_bytes());
        put(h, 56, &DB_COMPATIBILITY.to_le_bytes());
        put(h, 60, &(ps as i16).to_le_bytes()); // db_iopagesize
        put(h, 62, &(ps as i16).to_le_bytes()); // db_logpagesize
        h[64] = u8::from(shutdown); // is_shutdown
        put(h, 68, &next_trid.to_le_bytes());
        put(h, 72, &self.max_mvccid.saturating_add(1).max(MVCCID_FIRST).to_le_bytes());
        put(h, 88, &(n as i32).to_le_bytes());
        put(h, 96, &fpageid.to_le_bytes());
        put_lsa(h, 104, end_lsa); // append_lsa
        put_lsa(h, 112, if shutdown { end_lsa } else { Lsa::new(0, 0) }); // chkpt_lsa
        put(h, 120, &nxarv.to_le_bytes());
        put(h, 128, &(slot(nxarv) as i32).to_le_bytes());
        put(h, 132, &(m as i32).to_le_bytes());
        put(h, 136, &(-1i32).to_le_bytes()); // last_arv_num_for_syscrashes
        put(h, 140, &(-1i32).to_le_bytes()); // last_deleted_arv_num
        for off in [144, 152, 160] {
            put_lsa(h, off, Lsa::NULL); // backup LSAs
        }
        put(h, 168, self.cfg.prefix.as_bytes());
        put(h, 308, &(-1i32).to_le_bytes()); // ha_file_status
        put_lsa(h, 312, end_lsa); // eof_lsa
        put_lsa(h, 320, Lsa::NULL); // smallest_lsa_at_last_chkpt
        put_lsa(h, 328, Lsa::NULL); // mvcc_op_log_lsa
        set_checksum(&mut page);
        page
    }

    /// A live writer going on with the log in `dir` after the process writing it died (as a
    /// server restarting after a crash): the ring's unarchived pages are read back, and the log
    /// ends after the last record whose successor (the next record's header, or the end
    /// marker) is written and points back to it — where a reader following the log stops too;
    /// a record cut short by the crash is overwritten. Transactions that were open are in
    /// [`LogWriter::open_transactions`]: the caller ends them (the engine's recovery aborts
    /// them). `cfg` must be the configuration the log was written with.
    pub fn resume(cfg: WriterConfig, dir: &Path) -> Result<LogWriter, String> {
        let err = |e: io::Error| format!("{}: {e}", dir.display());
        let mut w = LogWriter::streaming(cfg, dir)?;
        let (ps, n, k) = (w.cfg.page_size, w.cfg.active_pages as i64, w.cfg.archive_pages);
        let active = fs::read(dir.join(format!("{}_lgat", w.cfg.prefix))).map_err(err)?;
        if active.len() < ps * (n as usize + 1) {
            return Err(format!("{}: the active volume is shorter than its ring", dir.display()));
        }
        let mut archives = Vec::new();
        while dir.join(format!("{}_lgar{:03}", w.cfg.prefix, archives.len())).exists() {
            archives.push(dir.join(format!("{}_lgar{:03}", w.cfg.prefix, archives.len())));
        }
        let base = archives.len() as i64 * k;
        // The ring's pages from the first unarchived one, as long as each slot holds its page.
        let slot_bytes = |p: i64| {
            let s = (p.rem_euclid(n) + 1) as usize * ps;
            &active[s..s + ps]
        };
        let mut last_page = base - 1;
        while PageHeader::parse(slot_bytes(last_page + 1)).logical_pageid == last_page + 1 {
            last_page += 1;
            if last_page - base >= n {
                break;
            }
        }
        w.base = base;
        w.buf.clear();
        for p in base..=last_page {
            w.buf.extend_from_slice(slot_bytes(p));
        }
        w.archive_trids = vec![1; archives.len()];
        w.stream = Some((dir.to_path_buf(), archives));
        // The end: walk the records whose successor is written and points back.
        let area = w.area;
        let header_at = |w: &LogWriter, l: Lsa| -> Option<(Lsa, Lsa, i32, i32)> {
            if l.pageid < w.base
                || l.pageid > last_page
                || l.offset < 0
                || l.offset as usize + RECORD_HEADER_SIZE > area
            {
                return None;
            }
            let at = (l.pageid - w.base) as usize * ps + PAGE_HEADER_SIZE + l.offset as usize;
            let h = &w.buf[at..at + RECORD_HEADER_SIZE];
            Some((lsa_at(h, BACK_LSA_AT), lsa_at(h, FORW_LSA_AT), i32_at(h, TRID_AT), i32_at(h, TYPE_AT)))
        };
        let mut at = None;
        for p in base..=last_page {
            let off = PageHeader::parse(slot_bytes(p)).offset;
            if off >= 0 {
                at = Some(Lsa::new(p, off));
                break;
            }
        }
        let mut end = at.unwrap_or(Lsa::new(base.max(0), 0));
        while let Some((_, forw, trid, t)) = header_at(&w, end) {
            if t == LOG_END_OF_LOG || forw.is_null() || forw <= end {
                break;
            }
            match header_at(&w, forw) {
                Some((back, _, _, next_t))
                    if back == end && (next_t == LOG_END_OF_LOG || data_header_size(next_t).is_some()) => {}
                _ => break,
            }
            w.last_lsa = end;
            w.max_trid = w.max_trid.max(trid);
            w.tran_last.insert(trid, end);
            if t == LOG_COMMIT || t == LOG_ABORT {
                w.tran_last.remove(&trid);
            }
            end = forw;
        }
        w.tran_last.retain(|&trid, _| trid > 0);
        // What follows the end is rewritten: the end page keeps its bytes before the end.
        w.pos = Pos { pageid: end.pageid, off: end.offset as usize };
        w.ensure_page(end.pageid);
        let keep = (end.pageid - w.base + 1) as usize * ps;
        w.buf.truncate(keep);
        let from = (end.pageid - w.base) as usize * ps + PAGE_HEADER_SIZE + end.offset as usize;
        w.buf[from..].fill(FILL);
        if w.buf[keep - ps + 8..keep - ps + 10] == end.offset.to_le_bytes() && end.offset >= 0 {
            // The page's first record was cut short: no record starts on it any more.
            w.buf[keep - ps + 8..keep - ps + 10].copy_from_slice(&(-1i16).to_le_bytes());
        }
        w.flushed_from = end.pageid;
        w.live = true;
        Ok(w)
    }

    /// Transactions with records and no end record (after [`LogWriter::resume`]: those the
    /// crash left open), by trid.
    pub fn open_transactions(&self) -> Vec<i32> {
        let mut trids: Vec<i32> = self.tran_last.keys().copied().collect();
        trids.sort_unstable();
        trids
    }

    /// Live writing, as a running server flushes its log: writes the pages appended since the
    /// last flush into their ring slots of `<dir>/<prefix>_lgat` (created on the first flush),
    /// page by page in log order, the last one from a copy holding an end-of-log marker at the
    /// append position, then the header page (`append_lsa` there, not shut down). Archives are
    /// written as they become certain, before the ring slots of their pages are reused (a
    /// streaming writer into `dir`). `torn`: write only the first `torn` bytes of the last page
    /// (a flush cut short by a crash), and no header.
    pub fn flush(&mut self, torn: Option<usize>) -> io::Result<()> {
        use std::io::{Seek, SeekFrom, Write};
        let Some((dir, _)) = &self.stream else {
            return Err(io::Error::other("flush needs a streaming writer (LogWriter::streaming)"));
        };
        let (ps, n, k) = (self.cfg.page_size, self.cfg.active_pages as i64, self.cfg.archive_pages);
        let path = dir.join(format!("{}_lgat", self.cfg.prefix));
        let end = self.pos;
        if !path.exists() {
            // The volume as createdb leaves it (fileio_format's pattern in every slot, which
            // fails the identity check; a header with nothing appended), made under another
            // name and renamed, so that a reader never opens half a volume.
            let mut blank = vec![0u8; ps * (n as usize + 1)];
            for slot_page in blank.chunks_exact_mut(ps) {
                slot_page[..14].fill(FILL);
                slot_page[ps - 8..].fill(FILL);
            }
            blank[..ps].copy_from_slice(&self.active_header(Lsa::new(0, 0), 1, 0, 0, 0, false));
            let tmp = path.with_extension("init");
            fs::write(&tmp, &blank)?;
            fs::rename(&tmp, &path)?;
        }
        let mut file = fs::OpenOptions::new().write(true).open(&path)?;
        let last = end.pageid;
        let fpageid = (last / n) * n;
        let slot = |p: i64| (p - fpageid).rem_euclid(n) + 1;
        let next_trid = self.max_trid.saturating_add(1).max(1);
        self.ensure_page(last);
        self.live = true;
        let first = self.flushed_from.max(self.base).max(last - n + 1).max(0);
        for p in first..=last {
            // The archive of the page this slot held is written before the slot is reused.
            if p >= n {
                self.write_archives((p - n) / k + 1)?;
            }
            let src = (p - self.base) as usize * ps;
            let mut page = self.buf[src..src + ps].to_vec();
            if p == last {
                // The end marker, in the copy only: the next record takes its place.
                let at = PAGE_HEADER_SIZE + end.off;
                if i16::from_le_bytes([page[8], page[9]]) == -1 {
                    page[8..10].copy_from_slice(&(end.off as i16).to_le_bytes());
                }
                let h = &mut page[at..at + RECORD_HEADER_SIZE];
                put_lsa(h, 0, Lsa::NULL);
                put_lsa(h, 8, self.last_lsa);
                put_lsa(h, 16, Lsa::NULL);
                put(h, 24, &next_trid.to_le_bytes());
                put(h, 28, &LOG_END_OF_LOG.to_le_bytes());
            }
            set_checksum(&mut page);
            let len = if p == last { torn.unwrap_or(ps).min(ps) } else { ps };
            file.seek(SeekFrom::Start(slot(p) as u64 * ps as u64))?;
            file.write_all(&page[..len])?;
        }
        self.flushed_from = last;
        if torn.is_none() {
            let m = self.stream.as_ref().map_or(0, |(_, w)| w.len() as i64);
            let header = self.active_header(end.lsa(), next_trid, m * k, m, fpageid, false);
            file.seek(SeekFrom::Start(0))?;
            file.write_all(&header)?;
        }
        Ok(())
    }
}

/// Sets the page header of a header page {-9, -1, 0} and returns the struct area after it.
fn header_page(page: &mut [u8]) -> &mut [u8] {
    put(page, 0, &HEADER_PAGE_ID.to_le_bytes());
    put(page, 8, &(-1i16).to_le_bytes());
    put(page, 10, &0i16.to_le_bytes());
    &mut page[PAGE_HEADER_SIZE..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::page::{checksum_ok, PageHeader};
    use crate::log::logset::LogSet;
    use crate::log::payload::ReadPayloads;
    use crate::log::walker::{EndReason, OnEncrypted, Walker};
    use std::sync::Arc;

    use crate::test_rng::Rng;

    /// What a test appended, to compare with what the reader finds.
    struct Expect {
        lsa: Lsa,
        trid: i32,
        rectype: i32,
        fields: DataFields,
        undo: Vec<u8>,
        redo: Vec<u8>,
        undo_zipped: bool,
        redo_zipped: bool,
    }

    struct Log {
        w: LogWriter,
        want: Vec<Expect>,
        /// A streaming writer given the same records.
        mirror: Option<LogWriter>,
    }

    impl Log {
        fn new(cfg: WriterConfig) -> Log {
            Log { w: LogWriter::new(cfg).unwrap(), want: Vec::new(), mirror: None }
        }
        #[allow(clippy::too_many_arguments)]
        fn add(&mut self, trid: i32, t: i32, f: DataFields, undo: Vec<u8>, redo: Vec<u8>, zu: bool, zr: bool) -> Lsa {
            let lsa = self.w.append(trid, t, &f, &undo, &redo, zu, zr).unwrap();
            if let Some(m) = self.mirror.as_mut() {
                assert_eq!(m.append(trid, t, &f, &undo, &redo, zu, zr).unwrap(), lsa);
            }
            let undo_zipped = zu && may_zip(t) && zip(&undo).is_some();
            let redo_zipped = is_diff(t) || (zr && may_zip(t) && zip(&redo).is_some());
            self.want.push(Expect { lsa, trid, rectype: t, fields: f, undo, redo, undo_zipped, redo_zipped });
            lsa
        }
        /// Plain record with an undo and/or redo payload of the given sizes.
        fn simple(&mut self, t: i32, undo_len: usize, redo_len: usize) -> Lsa {
            let f = DataFields { rcvindex: 7, ..Default::default() };
            let undo = vec![0x11; undo_len];
            let redo = vec![0x22; redo_len];
            self.add(1, t, f, undo, redo, false, false)
        }
        /// Writes the files, reads them back and checks every record.
        fn check(self) -> Checked {
            let dir = tempfile::tempdir().unwrap();
            let cfg = self.w.config().clone();
            let end = self.w.end_lsa();
            let written = self.w.finish(dir.path()).unwrap();
            assert_eq!(written.end_lsa, end);
            assert_eq!(written.records, self.want.iter().map(|e| e.lsa).collect::<Vec<_>>());
            let set = Arc::new(LogSet::open(&[dir.path()]).unwrap());
            let recs = verify(&set, &cfg, &written, &self.want);
            Checked { written, set, recs, _dir: dir }
        }
    }

    /// A log written and verified; the temporary directory lives as long as this.
    struct Checked {
        written: WrittenLog,
        set: Arc<LogSet>,
        recs: Vec<crate::log::record::Record>,
        _dir: tempfile::TempDir,
    }

    fn verify(
        log: &Arc<LogSet>,
        cfg: &WriterConfig,
        written: &WrittenLog,
        want: &[Expect],
    ) -> Vec<crate::log::record::Record> {
        let h = log.header().unwrap().clone();
        let n = cfg.active_pages as i64;
        assert_eq!(log.page_size, cfg.page_size);
        assert_eq!(h.npages as i64, n);
        assert!(h.is_shutdown);
        assert_eq!(h.append_lsa, written.end_lsa);
        assert_eq!(h.eof_lsa, written.end_lsa);
        assert_eq!(h.chkpt_lsa, written.end_lsa);
        assert_eq!(h.prefix_name, cfg.prefix);
        assert_eq!(h.db_release, cfg.release);
        assert_eq!(h.nxarv_num as usize, written.archives.len());
        assert_eq!(h.nxarv_pageid, written.archives.len() as i64 * cfg.archive_pages);
        assert_eq!(Some(h.nxarv_phy_pageid as i64), log.ring_slot(h.nxarv_pageid));
        let max_trid = want.iter().map(|e| e.trid).max().unwrap_or(0);
        assert_eq!(h.next_trid, (max_trid + 1).max(1));
        assert_eq!(std::fs::metadata(&written.active).unwrap().len(), (n as u64 + 1) * cfg.page_size as u64);

        let mut walker = Walker::new(log.clone(), None, None, OnEncrypted::Raise).unwrap();
        let mut recs = Vec::new();
        for r in walker.by_ref() {
            recs.push(r.unwrap());
        }
        assert_eq!(walker.end_reason, Some(EndReason::EndMarker));
        assert_eq!(walker.end_lsa, Some(written.end_lsa));
        assert_eq!(recs.len(), want.len());

        let mut last_of: HashMap<i32, Lsa> = HashMap::new();
        let (mut undo, mut redo) = (Vec::new(), Vec::new());
        for (i, (rec, e)) in recs.iter().zip(want).enumerate() {
            let ctx = format!("record {i} at {} type {}", e.lsa, e.rectype);
            assert_eq!(rec.lsa, e.lsa, "{ctx}");
            assert_eq!(rec.trid, e.trid, "{ctx}");
            assert_eq!(rec.rectype, e.rectype, "{ctx}");
            let back = if i == 0 { Lsa::NULL } else { want[i - 1].lsa };
            let forw = want.get(i + 1).map(|n| n.lsa).unwrap_or(written.end_lsa);
            assert_eq!(rec.back_lsa, back, "{ctx}");
            assert_eq!(rec.forw_lsa, forw, "{ctx}");
            assert_eq!(rec.prev_tranlsa, last_of.insert(e.trid, e.lsa).unwrap_or(Lsa::NULL), "{ctx}");
            if e.rectype == LOG_COMMIT || e.rectype == LOG_ABORT {
                last_of.remove(&e.trid);
            }
            assert_eq!(rec.undo.zipped, e.undo_zipped, "{ctx}");
            assert_eq!(rec.redo.zipped, e.redo_zipped, "{ctx}");
            log.images(rec, &mut undo, &mut redo).unwrap();
            assert!(undo == e.undo, "{ctx}: undo image differs ({} vs {} bytes)", undo.len(), e.undo.len());
            assert!(redo == e.redo, "{ctx}: redo image differs ({} vs {} bytes)", redo.len(), e.redo.len());

            let f = &e.fields;
            let t = e.rectype;
            if has_log_data(t) || t == LOG_DBEXTERN_REDO_DATA {
                assert_eq!(rec.rcvindex(), Some(f.rcvindex), "{ctx}");
            }
            if has_log_data(t) {
                assert_eq!(rec.data_page(), Some((f.volid, f.pageid, f.offset)), "{ctx}");
            }
            if matches!(
                t,
                LOG_MVCC_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA | LOG_MVCC_UNDO_DATA | LOG_MVCC_REDO_DATA
            ) {
                assert_eq!(rec.mvccid(), Some(f.mvccid), "{ctx}");
            }
            if matches!(t, LOG_COMMIT | LOG_ABORT | LOG_COMMIT_WITH_POSTPONE | LOG_DUMMY_HA_SERVER_STATE) {
                assert_eq!(rec.at_time(), Some(f.at_time), "{ctx}");
            }
            if t == LOG_SUPPLEMENTAL_INFO {
                assert_eq!(rec.supplement_type(), Some(f.supplement_type), "{ctx}");
            }
            if t == LOG_COMPENSATE {
                assert_eq!(rec.undo_nxlsa(), Some(f.lsa.unwrap_or(Lsa::NULL)), "{ctx}");
            }
            if t == LOG_END_CHKPT {
                assert_eq!(rec.chkpt_ntrans(), Some((e.undo.len() / CHKPT_TRANS_SIZE) as i32), "{ctx}");
            }
            if t == LOG_SYSOP_END || t == LOG_SYSOP_START_POSTPONE {
                assert_eq!(rec.sysop_type(), Some(f.sysop_type), "{ctx}");
                assert_eq!(rec.sysop_lastparent_lsa(), Some(f.lsa.unwrap_or(Lsa::NULL)), "{ctx}");
                if f.sysop_type == SYSOP_END_LOGICAL_UNDO || f.sysop_type == SYSOP_END_LOGICAL_MVCC_UNDO {
                    assert_eq!(rec.sysop_undo_rcvindex(), Some(f.rcvindex), "{ctx}");
                }
            }
        }
        recs
    }

    /// Types the random test draws from (every type with a writer in 11.4, plus 2PC).
    const TYPES: [i32; 34] = [
        2, 3, 4, 5, 6, 7, 8, 14, 15, 17, 18, 20, 22, 25, 26, 27, 28, 29, 30, 34, 36, 37, 39, 40, 43, 44, 45, 46, 47,
        48, 49, 50, 51, 52,
    ];

    fn random_record(rng: &mut Rng, area: usize, log: &mut Log, lsas: &[Lsa]) {
        let mut t = TYPES[rng.below(TYPES.len() as u64) as usize];
        let size = |rng: &mut Rng| -> usize {
            match rng.below(10) {
                0..=4 => rng.range(0, 64),
                5..=7 => rng.range(0, 600),
                8 => rng.range(0, 2 * area),
                _ => rng.range(2 * area, 5 * area),
            }
        };
        let pick_lsa = |rng: &mut Rng| -> Option<Lsa> {
            if lsas.is_empty() || rng.below(4) == 0 {
                None
            } else {
                Some(lsas[rng.below(lsas.len() as u64) as usize])
            }
        };
        let f = DataFields {
            rcvindex: rng.range(0, 150) as i32,
            volid: rng.range(0, 5) as i16,
            pageid: rng.next() as i32,
            offset: rng.range(0, 400) as i16 - 1,
            mvccid: rng.next() >> 8,
            supplement_type: rng.range(0, 8) as i32,
            at_time: 1_700_000_000 + rng.range(0, 1_000_000) as i64,
            lsa: pick_lsa(rng),
            sysop_type: rng.range(0, 5) as i32,
            ha_state: rng.range(0, 6) as i32,
        };
        let (has_undo, has_redo) = slots(t, f.sysop_type);
        let (u_len, r_len) = (size(rng), size(rng));
        let mut undo = if has_undo { rng.bytes(u_len) } else { Vec::new() };
        let mut redo = if has_redo { rng.bytes(r_len) } else { Vec::new() };
        match t {
            LOG_END_CHKPT => {
                undo.truncate(undo.len() / CHKPT_TRANS_SIZE * CHKPT_TRANS_SIZE);
                redo.truncate(redo.len() / CHKPT_SYSOP_SIZE * CHKPT_SYSOP_SIZE);
            }
            LOG_2PC_PREPARE => redo.truncate(redo.len() / OBJ_LOCK_SIZE * OBJ_LOCK_SIZE),
            LOG_DIFF_UNDOREDO_DATA | LOG_MVCC_DIFF_UNDOREDO_DATA => {
                // An update: the redo image is the undo image with a few bytes changed.
                let len = rng.range(64, 3 * area);
                let u_len = rng.range(1, len + 100);
                undo = rng.bytes(u_len);
                redo = (0..len).map(|i| undo.get(i).copied().unwrap_or(0x5A)).collect();
                for _ in 0..rng.range(0, 8) {
                    let i = rng.below(len as u64) as usize;
                    redo[i] ^= 0x77;
                }
                let mut d = redo.clone();
                undo_diff(&undo, &mut d);
                if zip(&d).is_none() {
                    t = if t == LOG_DIFF_UNDOREDO_DATA { LOG_UNDOREDO_DATA } else { LOG_MVCC_UNDOREDO_DATA };
                }
            }
            _ => {}
        }
        let trid = rng.range(0, 12) as i32 - 2;
        let (zu, zr) = (rng.below(2) == 0, rng.below(2) == 0);
        log.add(trid, t, f, undo, redo, zu, zr);
    }

    #[test]
    fn random_logs_round_trip() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for page_size in [4096, 8192, 16384] {
            for (n, k) in [(4, 2), (5, 3), (6, 2), (7, 3), (8, 3), (4, 4)] {
                seed = seed.wrapping_add(0x1234_5678_9ABC_DEF1);
                let mut rng = Rng(seed);
                let cfg = WriterConfig { page_size, active_pages: n, archive_pages: k, ..Default::default() };
                let mut log = Log::new(cfg);
                let area = log.w.area_size();
                let mut lsas = Vec::new();
                // Long enough that the ring wraps several times and archives pile up.
                while log.w.end_lsa().pageid < 5 * n as i64 + rng.range(0, 5) as i64 {
                    random_record(&mut rng, area, &mut log, &lsas);
                    lsas.push(log.want.last().unwrap().lsa);
                }
                let Checked { written, set, .. } = log.check();
                let h = set.header().unwrap();
                assert!(h.fpageid > 0, "ring never wrapped");
                assert!(!written.archives.is_empty());
                assert_eq!(set.archives.len(), written.archives.len());
            }
        }
    }

    /// Log pages held in memory (as a live follower would hold what it tailed): a second
    /// page source for the same decoder.
    struct MemPages {
        page_size: usize,
        pages: HashMap<i64, Vec<u8>>,
    }

    impl crate::log::source::PageSource for MemPages {
        fn page_size(&self) -> usize {
            self.page_size
        }
        fn fetch(&self, pageid: i64) -> crate::log::source::Fetch<'_> {
            match self.pages.get(&pageid) {
                Some(b) => crate::log::source::Fetch::Ok(crate::log::source::Page {
                    bytes: b,
                    header: PageHeader::parse(b),
                    vol: 0,
                    archived: false,
                }),
                None => crate::log::source::Fetch::Absent(crate::log::source::Absent::NoVolume),
            }
        }
        fn fetch_error(&self, _f: crate::log::source::Fetch<'_>, pageid: i64, lsa: Lsa) -> crate::error::LogError {
            crate::error::LogError::Truncated {
                file: "memory".into(),
                lsa: Some(lsa),
                msg: format!("no page {pageid}"),
            }
        }
        fn volume_name(&self, _vol: usize) -> &str {
            "memory"
        }
        fn total_bytes(&self) -> u64 {
            (self.pages.len() * self.page_size) as u64
        }
    }

    #[test]
    fn a_streaming_writer_writes_the_same_files_in_bounded_memory() {
        for (seed, page_size, n, k) in [(1u64, 4096, 8, 4), (2, 4096, 5, 5), (3, 8192, 6, 1), (4, 16384, 3, 2)] {
            let mut rng = Rng(0xabcd_0000 + seed);
            let cfg = WriterConfig { page_size, active_pages: n, archive_pages: k, ..Default::default() };
            let streamed = tempfile::tempdir().unwrap();
            let mut log = Log::new(cfg.clone());
            log.mirror = Some(LogWriter::streaming(cfg, streamed.path()).unwrap());
            let area = log.w.area_size();
            let (mut lsas, mut peak) = (Vec::new(), 0);
            while log.w.end_lsa().pageid < 60 {
                random_record(&mut rng, area, &mut log, &lsas);
                lsas.push(log.want.last().unwrap().lsa);
                peak = peak.max(log.mirror.as_ref().unwrap().buffered_bytes());
            }
            // A ring, an archive, and the pages a record spans (up to 5 areas plus headers).
            assert!(peak <= (n as usize + k as usize + 8) * page_size, "{peak} bytes held");
            let mirror = log.mirror.take().unwrap();
            let whole = tempfile::tempdir().unwrap();
            let a = log.w.finish(whole.path()).unwrap();
            let b = mirror.finish(streamed.path()).unwrap();
            assert_eq!((a.end_lsa, a.archives.len()), (b.end_lsa, b.archives.len()));
            assert!(a.archives.len() > 5, "seed {seed}: {} archives", a.archives.len());
            for (x, y) in a.archives.iter().chain([&a.active]).zip(b.archives.iter().chain([&b.active])) {
                assert_eq!(x.file_name(), y.file_name());
                assert!(fs::read(x).unwrap() == fs::read(y).unwrap(), "seed {seed}: {} differs", y.display());
            }
        }
    }

    #[test]
    fn records_decode_the_same_from_pages_in_memory() {
        let mut rng = Rng(0x5151_7777_0000_1234);
        let cfg = WriterConfig { page_size: 4096, active_pages: 8, archive_pages: 4, ..Default::default() };
        let mut log = Log::new(cfg);
        let area = log.w.area_size();
        let mut lsas = Vec::new();
        while log.w.end_lsa().pageid < 30 {
            random_record(&mut rng, area, &mut log, &lsas);
            lsas.push(log.want.last().unwrap().lsa);
        }
        let Checked { set, recs, .. } = log.check();
        let mut mem = MemPages { page_size: 4096, pages: HashMap::new() };
        for pageid in set.first_pageid..=recs.last().unwrap().end.pageid {
            if let crate::log::source::Fetch::Ok(p) = set.fetch(pageid) {
                mem.pages.insert(pageid, p.bytes.to_vec());
            }
        }
        let (mut u1, mut r1, mut u2, mut r2) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for rec in &recs {
            let m = crate::log::record::parse_record(&mem, rec.lsa).unwrap_or_else(|p| panic!("{}: {p:?}", rec.lsa));
            assert_eq!(
                (m.lsa, m.forw_lsa, m.prev_tranlsa, m.trid, m.rectype),
                (rec.lsa, rec.forw_lsa, rec.prev_tranlsa, rec.trid, rec.rectype)
            );
            assert_eq!(m.data_header(), rec.data_header());
            set.images(rec, &mut u1, &mut r1).unwrap();
            crate::log::payload::images(&mem, &m, &mut u2, &mut r2).unwrap();
            assert_eq!((&u1, &r1), (&u2, &r2), "{}", rec.lsa);
        }
        assert!(recs.len() > 20);
    }

    #[test]
    fn payload_exactly_to_the_area_end() {
        for page_size in [4096, 8192, 16384] {
            let mut log = Log::new(WriterConfig { page_size, active_pages: 4, archive_pages: 2, ..Default::default() });
            let a = log.w.area_size();
            // Header 0..32, data header 32..48, payload 48..A: the page is full to the last byte.
            log.simple(LOG_UNDO_DATA, a - 48, 0);
            assert_eq!(log.w.end_lsa(), Lsa::new(1, 0));
            // The same with the redo slot ending there.
            log.simple(LOG_UNDOREDO_DATA, 16, a - 32 - 24 - 16);
            assert_eq!(log.w.end_lsa(), Lsa::new(2, 0));
            log.simple(LOG_COMMIT, 0, 0);
            let Checked { set, recs, .. } = log.check();
            assert_eq!(recs[1].lsa, Lsa::new(1, 0));
            let crate::log::source::Fetch::Ok(page) = set.fetch(1) else { panic!("page 1") };
            assert_eq!(page.header.offset, 0);
        }
    }

    #[test]
    fn headers_that_do_not_fit_move_to_the_next_page() {
        for page_size in [4096, 8192, 16384] {
            let mut log = Log::new(WriterConfig { page_size, active_pages: 4, archive_pages: 2, ..Default::default() });
            let a = log.w.area_size();
            // 1. A record whose MVCC data header (48 bytes) would end exactly at A.
            log.simple(LOG_REDO_DATA, 0, a - 80 - 48);
            assert_eq!(log.w.end_lsa(), Lsa::new(0, (a - 80) as i16));
            let f = DataFields { rcvindex: 9, mvccid: 77, ..Default::default() };
            let lsa = log.add(3, LOG_MVCC_UNDOREDO_DATA, f, vec![1; 10], vec![2; 20], false, false);
            assert_eq!(lsa, Lsa::new(0, (a - 80) as i16));
            // Header at A-80, data header on page 1 at 0..48, payloads 48..64, 64..84 → 88.
            assert_eq!(log.w.end_lsa(), Lsa::new(1, 88));
            // 2. A record header that would end exactly at A goes to the next page.
            let left = a - 88 - 32;
            log.simple(LOG_REDO_DATA, 0, left - 48);
            assert_eq!(log.w.end_lsa(), Lsa::new(2, 0), "A-32 does not hold a record header");
            // 3. A data header that ends 8 bytes before A still fits; its payload fills the page.
            log.simple(LOG_REDO_DATA, 0, a - 104);
            assert_eq!(log.w.end_lsa(), Lsa::new(2, (a - 56) as i16));
            log.simple(LOG_UNDO_DATA, 8, 0);
            assert_eq!(log.w.end_lsa(), Lsa::new(3, 0));
            let Checked { set, recs, .. } = log.check();
            // Page 1 starts with a data header and payloads; its first record header is at 88.
            assert_eq!(set.fetch_for(1, true).ok().unwrap().header.offset, 88);
            assert_eq!(recs[1].undo.start, Lsa::new(1, 48));
            assert_eq!(recs[4].undo.start, Lsa::new(2, (a - 8) as i16));
        }
    }

    /// Every record type at every aligned offset near the end of a page, with and without
    /// payloads: hits `off + len == A` for the record header and every data-header size.
    #[test]
    fn boundary_sweep_all_types() {
        for page_size in [4096, 8192, 16384] {
            let mut log =
                Log::new(WriterConfig { page_size, active_pages: 64, archive_pages: 32, ..Default::default() });
            let a = log.w.area_size();
            let mut hits = 0;
            for with_payload in [false, true] {
                for d in (8..=136).step_by(8) {
                    for &t in TYPES.iter() {
                        // To a page start: a redo payload that fills the page to its last byte.
                        let o = log.w.end_lsa().offset as usize;
                        if o != 0 {
                            let fill = if o + 48 < a { a - o - 48 } else { a - 16 };
                            log.simple(LOG_REDO_DATA, 0, fill);
                            assert_eq!(log.w.end_lsa().offset, 0);
                        }
                        // Then to offset A - d (or the next page when A - d cannot hold a header).
                        log.simple(LOG_REDO_DATA, 0, a - d - 48);
                        let f = DataFields {
                            rcvindex: d as i32,
                            sysop_type: SYSOP_END_LOGICAL_MVCC_UNDO,
                            mvccid: 5,
                            ..Default::default()
                        };
                        let (has_undo, has_redo) = slots(t, f.sysop_type);
                        let len = |has: bool, elem: usize| if has && with_payload { elem * 2 } else { 0 };
                        let (ul, rl) = match t {
                            LOG_END_CHKPT => (len(has_undo, CHKPT_TRANS_SIZE), len(has_redo, CHKPT_SYSOP_SIZE)),
                            LOG_2PC_PREPARE => (len(has_undo, 100), len(has_redo, OBJ_LOCK_SIZE)),
                            _ => (len(has_undo, 100), len(has_redo, 100)),
                        };
                        let mut redo = vec![0x33; rl];
                        if is_diff(t) {
                            redo = vec![0x33; 200]; // the XOR of equal images compresses
                        }
                        let lsa = log.add(9, t, f, vec![0x33; ul], redo, true, true);
                        let dh = data_header_size(t).unwrap();
                        if lsa.offset as usize + RECORD_HEADER_SIZE + dh.next_multiple_of(8) == a && dh > 0 {
                            hits += 1;
                        }
                    }
                }
            }
            assert!(hits >= 20, "only {hits} data headers ended exactly at the area end");
            log.check();
        }
    }

    #[test]
    fn zero_length_payloads_and_no_payload_types() {
        let mut log = Log::new(WriterConfig { active_pages: 2, archive_pages: 1, ..Default::default() });
        for t in [
            LOG_UNDOREDO_DATA,
            LOG_MVCC_UNDOREDO_DATA,
            LOG_UNDO_DATA,
            LOG_REDO_DATA,
            LOG_SUPPLEMENTAL_INFO,
            LOG_SAVEPOINT,
        ] {
            log.add(5, t, DataFields::default(), Vec::new(), Vec::new(), true, true);
        }
        for t in [LOG_START_CHKPT, LOG_END_CHKPT, LOG_COMMIT, LOG_SYSOP_END, LOG_DUMMY_GENERIC, LOG_2PC_RECV_ACK] {
            log.add(5, t, DataFields::default(), Vec::new(), Vec::new(), false, false);
        }
        let Checked { recs, .. } = log.check();
        // Undo-redo with nothing: 32 header + 24 (20 aligned) data header, no payload bytes.
        assert_eq!(recs[1].lsa.offset - recs[0].lsa.offset, 56);
        assert!(recs.iter().all(|r| r.undo.stored_len == 0 && r.redo.stored_len == 0));
    }

    #[test]
    fn empty_log_ends_at_page_zero() {
        let log = Log::new(WriterConfig { page_size: 8192, active_pages: 3, archive_pages: 2, ..Default::default() });
        let Checked { written, set, recs, .. } = log.check();
        assert!(recs.is_empty() && written.archives.is_empty());
        assert_eq!(written.end_lsa, Lsa::new(0, 0));
        assert_eq!(set.header().unwrap().next_trid, 1);
    }

    #[test]
    fn record_spanning_many_pages_and_the_whole_ring() {
        for page_size in [4096, 16384] {
            let mut log = Log::new(WriterConfig { page_size, active_pages: 4, archive_pages: 3, ..Default::default() });
            let a = log.w.area_size();
            log.simple(LOG_COMMIT, 0, 0);
            // Six pages of random (incompressible) redo: longer than the ring.
            let mut rng = Rng(42);
            let redo: Vec<u8> = (0..6 * a + 123).map(|_| rng.next() as u8).collect();
            let lsa = log.add(
                2,
                LOG_REDO_DATA,
                DataFields { rcvindex: 3, ..Default::default() },
                Vec::new(),
                redo,
                false,
                true,
            );
            log.simple(LOG_UNDO_DATA, 40, 0);
            let Checked { written, set, recs, .. } = log.check();
            assert_eq!(recs[1].lsa, lsa);
            assert!(!recs[1].redo.zipped);
            // Pages 0..6, ring of 4: one archive of pages 0..2.
            assert_eq!(written.archives.len(), 1);
            // Middle pages hold only payload: no record starts there.
            for p in 1..6 {
                assert_eq!(set.fetch_for(p, false).ok().unwrap().header.offset, -1, "page {p}");
            }
        }
    }

    #[test]
    fn record_crossing_from_the_last_archive_into_the_active_volume() {
        for page_size in [4096, 8192, 16384] {
            let cfg = WriterConfig { page_size, active_pages: 4, archive_pages: 2, ..Default::default() };
            let mut log = Log::new(cfg);
            let a = log.w.area_size();
            // Fill to the middle of page 3, then a record that runs into page 4.
            while log.w.end_lsa() < Lsa::new(3, (a / 2) as i16) {
                log.simple(LOG_REDO_DATA, 0, 500);
            }
            let crossing = log.simple(LOG_UNDOREDO_DATA, 100, a);
            assert_eq!(crossing.pageid, 3);
            assert_eq!(log.w.end_lsa().pageid, 4);
            // Finish on page 6: m = ceil((7 - 4) / 2) = 2 archives, nxarv = 4.
            while log.w.end_lsa().pageid < 6 {
                log.simple(LOG_UNDO_DATA, 300, 0);
            }
            let Checked { written, set, recs, .. } = log.check();
            assert_eq!(written.end_lsa.pageid, 6);
            assert_eq!(written.archives.len(), 2);
            assert_eq!(set.nxarv_pageid(), 4);
            let rec = recs.iter().find(|r| r.lsa == crossing).unwrap();
            let archive_vol = set.archives.last().unwrap().vol;
            assert_eq!(rec.vol as usize, archive_vol, "header read from the last archive");
            assert_eq!(rec.redo.start.pageid, 3);
            assert_eq!(rec.end.pageid, 4);
            assert_eq!(set.fetch_for(4, false).ok().unwrap().vol, set.active.as_ref().unwrap().vol);
        }
    }

    /// Highly compressible payloads (LZ4 near its 255:1 limit) and a raw payload far longer
    /// than the ring, with the default shape.
    #[test]
    fn huge_payloads() {
        let mut log = Log::new(WriterConfig::default());
        let f = DataFields { rcvindex: 1, ..Default::default() };
        log.add(1, LOG_UNDOREDO_DATA, f.clone(), vec![0; 1 << 20], vec![0xAB; 3 << 20], true, true);
        let mut rng = Rng(3);
        let noise: Vec<u8> = (0..400_000).map(|_| rng.next() as u8).collect();
        log.add(2, LOG_REDO_DATA, f, Vec::new(), noise, false, true);
        log.simple(LOG_COMMIT, 0, 0);
        let Checked { recs, written, .. } = log.check();
        assert!(recs[0].undo.zipped && recs[0].redo.zipped && !recs[1].redo.zipped);
        assert!(written.archives.len() > 1);
    }

    #[test]
    fn diff_and_zip_encoding() {
        let mut log = Log::new(WriterConfig::default());
        let undo: Vec<u8> = b"row-0001;".iter().cycle().take(900).copied().collect();
        let mut redo = undo.clone();
        redo[10] = b'X';
        redo.extend_from_slice(&[7; 50]);
        let f = DataFields { rcvindex: 17, mvccid: 99, ..Default::default() };
        log.add(4, LOG_MVCC_DIFF_UNDOREDO_DATA, f.clone(), undo.clone(), redo.clone(), true, false);
        log.add(4, LOG_DIFF_UNDOREDO_DATA, f.clone(), undo.clone(), redo.clone(), false, false);
        log.add(4, LOG_UNDOREDO_DATA, f.clone(), undo.clone(), redo.clone(), true, true);
        // Types that never zip ignore the request.
        log.add(4, LOG_COMPENSATE, f.clone(), undo.clone(), Vec::new(), true, true);
        log.add(4, LOG_SUPPLEMENTAL_INFO, DataFields { supplement_type: 3, ..f }, undo.clone(), Vec::new(), true, true);
        let Checked { recs, .. } = log.check();
        assert!(recs[0].undo.zipped && recs[0].redo.zipped);
        assert!(!recs[1].undo.zipped && recs[1].redo.zipped);
        assert!(recs[2].undo.zipped && recs[2].redo.zipped);
        assert!(!recs[3].undo.zipped);
        assert!(recs[4].undo.zipped);
    }

    #[test]
    fn file_layout() {
        let mut log =
            Log::new(WriterConfig { page_size: 4096, active_pages: 5, archive_pages: 2, ..Default::default() });
        log.simple(LOG_REDO_DATA, 0, 5000); // pages 0..1
        log.simple(LOG_COMMIT, 0, 0);
        let dir = tempfile::tempdir().unwrap();
        let w = log.w.finish(dir.path()).unwrap();
        assert!(w.archives.is_empty());
        assert_eq!(w.active, dir.path().join("walcdc_lgat"));
        let bytes = std::fs::read(&w.active).unwrap();
        let hp = &bytes[..4096];
        assert!(checksum_ok(hp));
        assert_eq!(PageHeader::parse(hp).logical_pageid, -9);
        assert!(hp[16 + ACTIVE_HEADER_SIZE..].iter().all(|&b| b == 0xFF));
        // Slots 3..5 were never written: fileio_format pattern.
        for s in 3..=5 {
            let p = &bytes[s * 4096..(s + 1) * 4096];
            assert!(
                p[..14].iter().all(|&b| b == 0xFF)
                    && p[14..4088].iter().all(|&b| b == 0)
                    && p[4088..].iter().all(|&b| b == 0xFF)
            );
        }
        // The marker: bare header with type 35, NULL prev and forw, and 0xFF after it.
        let end = w.end_lsa;
        let page = &bytes[(end.pageid as usize + 1) * 4096..(end.pageid as usize + 2) * 4096];
        assert!(checksum_ok(page));
        let m = 16 + end.offset as usize;
        assert_eq!(&page[m..m + 8], &[0xFF; 8]);
        assert_eq!(Lsa::from_le_bytes(page[m + 8..m + 16].try_into().unwrap()), w.records[1]);
        assert_eq!(&page[m + 16..m + 24], &[0xFF; 8]);
        assert_eq!(i32::from_le_bytes(page[m + 28..m + 32].try_into().unwrap()), LOG_END_OF_LOG);
        assert!(page[m + 32..].iter().all(|&b| b == 0xFF));
    }

    #[test]
    fn archive_files_are_named_and_filled() {
        let mut log = Log::new(WriterConfig {
            page_size: 4096,
            active_pages: 2,
            archive_pages: 1,
            prefix: "db".into(),
            ..Default::default()
        });
        for _ in 0..3 {
            log.simple(LOG_REDO_DATA, 0, 4000);
        }
        let dir = tempfile::tempdir().unwrap();
        let w = log.w.finish(dir.path()).unwrap();
        let names: Vec<String> =
            w.archives.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["db_lgar000", "db_lgar001"]);
        let a1 = std::fs::read(&w.archives[1]).unwrap();
        assert_eq!(a1.len(), 2 * 4096);
        assert!(checksum_ok(&a1[..4096]) && checksum_ok(&a1[4096..]));
        assert_eq!(&a1[16..16 + 18], b"CUBRID/LogArchive\0");
        assert_eq!(i64::from_le_bytes(a1[16 + 48..16 + 56].try_into().unwrap()), 1);
        assert_eq!(PageHeader::parse(&a1[4096..]).logical_pageid, 1);
        assert!(LogSet::open(&[dir.path()]).is_ok());
    }

    #[test]
    fn refused_inputs() {
        let bad = |cfg: WriterConfig| LogWriter::new(cfg).is_err();
        assert!(bad(WriterConfig { page_size: 2048, ..Default::default() }));
        assert!(bad(WriterConfig { active_pages: 1, ..Default::default() }));
        assert!(bad(WriterConfig { archive_pages: 0, ..Default::default() }));
        assert!(bad(WriterConfig { active_pages: 4, archive_pages: 5, ..Default::default() }));
        assert!(bad(WriterConfig { prefix: "a_very_long_prefix_x".into(), ..Default::default() }));
        let mut w = LogWriter::new(WriterConfig::default()).unwrap();
        let f = DataFields::default();
        assert!(w.append(1, LOG_COMMIT, &f, b"x", b"", false, false).is_err());
        assert!(w.append(1, LOG_UNDO_DATA, &f, b"", b"x", false, false).is_err());
        assert!(w.append(1, LOG_SYSOP_END, &f, b"x", b"", false, false).is_err());
        assert!(w.append(1, LOG_END_OF_LOG, &f, b"", b"", false, false).is_err());
        assert!(w.append(1, 24, &f, b"", b"", false, false).is_err());
        assert!(w.append(1, LOG_END_CHKPT, &f, &[0; 100], b"", false, false).is_err());
        // A DIFF redo that does not compress.
        let mut rng = Rng(7);
        let noise: Vec<u8> = (0..500).map(|_| rng.next() as u8).collect();
        assert!(w.append(1, LOG_DIFF_UNDOREDO_DATA, &f, b"", &noise, false, false).is_err());
        // Nothing was appended by the refused calls.
        assert_eq!(w.end_lsa(), Lsa::new(0, 0));
        let logical = DataFields { sysop_type: SYSOP_END_LOGICAL_UNDO, ..Default::default() };
        assert!(w.append(1, LOG_SYSOP_END, &logical, b"x", b"", false, false).is_ok());
    }
}
