//! The forward walk: record after record from any LSA, across pages and volumes, to the true
//! end of the log (which, after a crash, lies past what the header says).

use std::sync::Arc;

use crate::error::{LogError, Result};
use crate::format::le::{i32_at, lsa_at};
use crate::format::lsa::Lsa;
use crate::format::page::PAGE_HEADER_SIZE;
use crate::log::logset::LogSet;
use crate::log::readahead::ReadAhead;
use crate::log::record::ReadRecords;
use crate::log::record::{parse_record_into, PageProblem, ParseProblem, Record, BACK_LSA_AT, FORW_LSA_AT};
use crate::log::source::{Absent, Fetch, LogSource};

/// What to do when the walk must cross a TDE-encrypted page (no keys are available).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnEncrypted {
    /// Fail with `LogError::Encrypted`.
    #[default]
    Raise,
    /// Skip to the first record that starts on the next clear page, and report the gap.
    Skip,
}

crate::choices!(OnEncrypted, "on_encrypted", { "raise" => OnEncrypted::Raise, "skip" => OnEncrypted::Skip });

/// A run of encrypted pages the walk skipped.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SkippedRange {
    /// The first record that could not be read (its header or payload is encrypted).
    pub from_lsa: Lsa,
    pub first_pageid: i64,
    pub last_pageid: i64,
    /// Where the walk resumed, or `None` if the encrypted run reaches the end of the log.
    pub resume_lsa: Option<Lsa>,
}

/// Readable records past a crash end: the walk ended at a torn or never-written page, yet later
/// pages of the same cycle of the ring hold records the walk cannot reach (a damaged tail, or
/// pages flushed out of order before the crash). The engine's recovery stops at the same place,
/// so they are not read; they are reported so the loss is never silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BeyondEnd {
    /// Where the walk ended.
    pub end_lsa: Lsa,
    /// The first record that starts on such a page.
    pub first_lsa: Lsa,
    /// How many pages past the end hold a readable record start.
    pub pages: u64,
}

/// Why a walk stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// A `LOG_END_OF_LOG` marker on an active page.
    EndMarker,
    /// The next record's page was never written in this cycle of the ring (crash end).
    Unwritten,
    /// A record the writer never completed (torn write after a crash).
    Torn,
    /// The last archive given, with no active volume after it.
    EndOfVolumes,
    /// The rest of the log is encrypted; the end comes from the (clean-shutdown) header.
    EncryptedTail,
    /// The caller's `end` LSA.
    Requested,
    /// Following a live log: what comes next is not (completely) written yet, or a page is
    /// being rewritten; a later snapshot of the log goes on from here ([`Walker::resume_on`]).
    LiveTail,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::EndMarker => "end_of_log",
            EndReason::Unwritten => "unwritten_page",
            EndReason::Torn => "torn_record",
            EndReason::EndOfVolumes => "end_of_volumes",
            EndReason::EncryptedTail => "encrypted_tail",
            EndReason::Requested => "requested_end",
            EndReason::LiveTail => "live_tail",
        }
    }
}

/// Walks records forward over a [`LogSource`] (the memory-mapped [`LogSet`] unless said
/// otherwise). Allocates nothing per record.
pub struct Walker<S: LogSource + ?Sized = LogSet> {
    log: Arc<S>,
    next: Option<Lsa>,
    end: Option<Lsa>,
    on_encrypted: OnEncrypted,
    /// Below this LSA the log must be complete: anything unreadable there is an error, never
    /// the end of the log. (The header's append LSA: exact after a clean shutdown, a lower
    /// bound after a crash.)
    must_exist_until: Lsa,
    pub skipped: Vec<SkippedRange>,
    /// Records on archived pages with a NULL `forw_lsa` or an end-of-log type: the walk went on
    /// at the next page, and the rest of their page was not read (a damaged archive).
    pub unplaced: Vec<Lsa>,
    /// Records readable past a torn or unwritten end of a crashed log (see [`BeyondEnd`]).
    pub beyond_end: Option<BeyondEnd>,
    /// Where the walk stopped (the end of the log, or the requested end).
    pub end_lsa: Option<Lsa>,
    pub end_reason: Option<EndReason>,
    /// The last record returned.
    pub last_lsa: Option<Lsa>,
    /// Pages below this one, from the walk's start, have been released (`LogSet::release_pages`).
    released_below: i64,
    /// Pages below this one were asked to be read ahead.
    prefetched_below: i64,
    /// The thread reading ahead of a long walk.
    read_ahead: Option<ReadAhead>,
    /// How many pages behind itself the walk keeps mapped ([`KEEP_MAPPED_BYTES`]).
    keep_mapped_pages: i64,
    /// The record last read ([`Walker::next_ref`] lends it).
    current: Option<Box<Record>>,
    /// Following a live log ([`Walker::follow`]).
    live: bool,
    /// Pages below this one were archived when the walk began (the snapshot's `nxarv_pageid`):
    /// what lies on them was written whole, as in a finished log.
    archived_below: i64,
    /// One range of a plan ([`Walker::for_range`]): the pages it walked are released when it
    /// ends (threads reading many short ranges would otherwise keep the whole log mapped).
    release_at_end: bool,
    /// Where the walk stopped at the end of what was written, to go on from in a later
    /// snapshot of the log (the record expected there, or `(page, -1)`).
    stopped_at: Option<Lsa>,
    /// Following: a page this walk (or the one before it, on an older snapshot) found absent
    /// at this LSA. Once is a stale snapshot (the server archived the page and reused its
    /// slot after the directory was listed); twice, in a fresh snapshot, it is missing.
    absent_at: Option<Lsa>,
}

/// How far behind itself a walk keeps pages mapped: the reads a change reader makes back into
/// the log (chases, rows of open transactions) mostly fall within it.
const KEEP_MAPPED_BYTES: i64 = 64 << 20;

impl<S: LogSource + ?Sized + 'static> Walker<S> {
    /// A walk from `start` (default: the first record of the set) to `end` (exclusive;
    /// default: the end of the log).
    pub fn new(log: Arc<S>, start: Option<Lsa>, end: Option<Lsa>, on_encrypted: OnEncrypted) -> Result<Walker<S>> {
        let must_exist_until = match log.header() {
            Some(h) => h.append_lsa,
            None => Lsa::new(log.nxarv_pageid(), 0),
        };
        let log_page_size = log.page_size() as i64;
        // Never past the append position, whatever a damaged header says of its archives.
        let archived_below = log.nxarv_pageid().min(must_exist_until.pageid);
        let start = match start {
            Some(s) => {
                if s.is_null() || s.pageid < 0 {
                    return Err(LogError::InvalidArgument { msg: format!("start LSA {s} is not a log address") });
                }
                s
            }
            None => Lsa::new(log.first_pageid(), -1),
        };
        Ok(Walker {
            log,
            next: Some(start),
            end,
            on_encrypted,
            must_exist_until,
            skipped: Vec::new(),
            unplaced: Vec::new(),
            beyond_end: None,
            end_lsa: None,
            end_reason: None,
            last_lsa: None,
            released_below: start.pageid.max(0),
            prefetched_below: start.pageid.max(0),
            read_ahead: None,
            keep_mapped_pages: KEEP_MAPPED_BYTES / log_page_size,
            current: None,
            live: false,
            archived_below,
            release_at_end: false,
            stopped_at: None,
            absent_at: None,
        })
    }

    /// As [`Walker::new`], for a start a caller gave: it must be where a record starts.
    pub fn checked(log: Arc<S>, start: Option<Lsa>, end: Option<Lsa>, on_encrypted: OnEncrypted) -> Result<Walker<S>> {
        if let Some(s) = start {
            validate_record_start(&*log, s)?;
        }
        Walker::new(log, start, end, on_encrypted)
    }

    /// As [`Walker::checked`], for one of the record-aligned ranges a log set is cut into
    /// (`ranges::split`): a range may start on a TDE-encrypted page, which the walk skips under
    /// `OnEncrypted::Skip` exactly as a walk from before the range would.
    pub fn for_range(
        log: Arc<S>,
        start: Option<Lsa>,
        end: Option<Lsa>,
        on_encrypted: OnEncrypted,
    ) -> Result<Walker<S>> {
        if let Some(s) = start {
            match validate_record_start(&*log, s) {
                Err(LogError::Encrypted { .. }) if on_encrypted == OnEncrypted::Skip => {}
                other => other?,
            }
        }
        let mut walker = Walker::new(log, start, end, on_encrypted)?;
        walker.release_at_end = true;
        Ok(walker)
    }

    pub fn log(&self) -> &Arc<S> {
        &self.log
    }

    /// The LSA the next call will read (None once the walk is over).
    pub fn position(&self) -> Option<Lsa> {
        self.next
    }

    /// The record the walk would read next, or where it ended: a record start (or the end of
    /// the log) to resume from.
    pub fn resume_point(&self) -> Option<Lsa> {
        match self.next {
            Some(l) if l.offset >= 0 => Some(l),
            Some(l) => self.first_record_from(l.pageid).ok().flatten(),
            None => self.end_lsa,
        }
    }

    fn finish<T>(&mut self, at: Option<Lsa>, reason: EndReason) -> Result<Option<T>> {
        if matches!(reason, EndReason::Torn | EndReason::Unwritten) && self.torn_tail_possible() {
            if let Some(at) = at {
                self.beyond_end = self.readable_beyond(at)?;
            }
        }
        if self.release_at_end {
            // The read-ahead stops first (its drop waits for it): a chunk it was still mapping
            // when the walk ended would be mapped after the release, and stay.
            self.read_ahead = None;
            let to = self.last_lsa.map_or(self.released_below, |l| l.pageid + 1);
            self.log.release_pages(self.released_below, to);
            self.released_below = self.released_below.max(to);
        }
        self.next = None;
        self.end_lsa = at;
        self.end_reason = Some(reason);
        Ok(None)
    }

    /// The first record that starts on page `pageid` or later: `(page, hdr.offset)` of the first
    /// page whose header names one. `None` at the end of what the set holds.
    fn first_record_from(&self, mut pageid: i64) -> Result<Option<Lsa>> {
        loop {
            match self.log.fetch(pageid) {
                Fetch::Ok(p) => {
                    if p.header.offset >= 0 {
                        return Ok(Some(Lsa::new(pageid, p.header.offset)));
                    }
                }
                Fetch::Encrypted(p) => {
                    if self.on_encrypted == OnEncrypted::Raise {
                        return Err(LogError::Encrypted {
                            file: self.log.volume_name(p.vol).to_string(),
                            lsa: Some(Lsa::new(pageid, -1)),
                            pageid,
                        });
                    }
                }
                Fetch::Failed(e) => return Err(e.at(Lsa::new(pageid, 0), pageid)),
                other => {
                    let beyond = Lsa::new(pageid, 0) >= self.must_exist_until;
                    if beyond {
                        return Ok(None);
                    }
                    return Err(self.log.fetch_error(other, pageid, Lsa::new(pageid, 0)));
                }
            }
            pageid += 1;
        }
    }

    /// Skips encrypted pages from `first_enc`; returns where to resume.
    fn skip_encrypted(&mut self, from_lsa: Lsa, first_enc: i64) -> Result<Option<Lsa>> {
        let mut q = first_enc + 1;
        let resume = loop {
            match self.log.fetch(q) {
                Fetch::Ok(p) if p.header.offset >= 0 => break Some(Lsa::new(q, p.header.offset)),
                Fetch::Ok(_) | Fetch::Encrypted(_) => q += 1,
                Fetch::BadChecksum { .. } | Fetch::Absent(Absent::ArchiveMissing) | Fetch::Failed(_) => {
                    return Err(self.log.fetch_error(self.log.fetch(q), q, Lsa::new(q, 0)))
                }
                Fetch::Absent(_) => break None,
            }
        };
        self.skipped.push(SkippedRange { from_lsa, first_pageid: first_enc, last_pageid: q - 1, resume_lsa: resume });
        Ok(resume)
    }

    /// Releases the pages more than [`KEEP_MAPPED_BYTES`] behind `pageid`, in steps of as much,
    /// and asks for as much ahead of it to be read (in steps of half as much).
    fn release_behind(&mut self, pageid: i64) {
        let keep = self.keep_mapped_pages;
        if pageid - self.released_below >= 2 * keep {
            let to = pageid - keep;
            self.log.release_pages(self.released_below, to);
            self.released_below = to;
        }
        if pageid + keep / 2 >= self.prefetched_below {
            let mut to = pageid + keep;
            if let Some(end) = self.end {
                to = to.min(end.pageid + 1);
            }
            // Only a walk that has gone a window's length reads ahead (most are short), except
            // from object storage, where each block waited for costs a request's latency.
            if self.read_ahead.is_none() && (pageid - self.released_below >= keep / 2 || self.log.is_remote()) {
                self.read_ahead = ReadAhead::start(self.log.clone(), pageid);
            }
            if let Some(r) = &self.read_ahead {
                r.want(pageid, to);
            }
            self.prefetched_below = to;
        }
    }

    /// Reads the log as a server is still writing it: a record is returned only once what
    /// follows it is written (the next record's header, or the end marker, points back to it),
    /// and read again then, so that no half-copied record is ever returned; a page failing its
    /// checksum, or anything unreadable past the header's append position, ends the walk at
    /// [`EndReason::LiveTail`] instead of failing it. A record followed by one on a page that was
    /// archived (below the append position) when the walk began is read as in a finished log.
    pub fn follow(mut self) -> Walker<S> {
        self.live = true;
        self
    }

    /// A walk over `log` (a later snapshot of the same log set) from where this one stopped at
    /// the end of what was written; `None` if it did not stop there (it ended at the caller's
    /// end, or has not ended).
    pub fn resume_on(&self, log: Arc<S>) -> Result<Option<Walker<S>>> {
        let Some(at) = self.stopped_at else { return Ok(None) };
        if log.db_creation() != self.log.db_creation() {
            return Err(LogError::Mismatch {
                file: log.set_name(),
                msg: format!(
                    "the log now belongs to another database (db_creation {}, was {}): not followed",
                    log.db_creation(),
                    self.log.db_creation()
                ),
            });
        }
        let mut w = Walker::new(log, Some(at), self.end, self.on_encrypted)?;
        w.live = self.live;
        w.keep_mapped_pages = self.keep_mapped_pages;
        w.absent_at = self.absent_at;
        Ok(Some(w))
    }

    /// Whether what follows `rec` is written: the header at its `forw_lsa` is the next record's
    /// or the end marker, and points back to `rec`.
    /// A page that cannot be fetched at all (object storage, after its retries) is an error,
    /// not a page not written yet.
    fn sealed(&self, rec: &Record) -> Result<bool> {
        let next = rec.forw_lsa;
        let area = self.log.area_size();
        if next.is_null() || next.offset < 0 || next.offset as usize + crate::log::record::RECORD_HEADER_SIZE > area {
            return Ok(false);
        }
        let page = match self.log.fetch(next.pageid) {
            Fetch::Ok(page) => page,
            Fetch::Failed(e) => return Err(e.at(next, next.pageid)),
            _ => return Ok(false),
        };
        let at = crate::format::page::PAGE_HEADER_SIZE + next.offset as usize;
        let h = &page.bytes[at..at + crate::log::record::RECORD_HEADER_SIZE];
        let rectype = i32_at(h, crate::log::record::TYPE_AT);
        Ok(lsa_at(h, crate::log::record::BACK_LSA_AT) == rec.lsa
            && (rectype == crate::format::rectype::LOG_END_OF_LOG
                || crate::format::rectype::data_header_size(rectype).is_some()))
    }

    /// Whether `rec` and the header that follows it lie on pages archived when the walk began.
    fn archived(&self, rec: &Record) -> bool {
        let next = rec.forw_lsa;
        !next.is_null() && next.offset >= 0 && next.pageid < self.archived_below
    }

    /// Ends a live walk where the written log ends for now.
    fn live_tail<T>(&mut self, at: Lsa) -> Result<Option<T>> {
        let r = self.finish(Some(at), EndReason::LiveTail);
        self.stopped_at = Some(at);
        r
    }

    /// The next record, `Ok(None)` at the end.
    pub fn next_record(&mut self) -> Result<Option<Record>> {
        Ok(self.next_ref()?.copied())
    }

    /// The next record, by reference to the walker's own copy (valid until the next call):
    /// nothing is moved per record. `Ok(None)` at the end.
    pub fn next_ref(&mut self) -> Result<Option<&Record>> {
        let mut current = self.current.take().unwrap_or_default();
        let read = self.next_into(&mut current);
        self.current = Some(current);
        Ok(if read? { self.current.as_deref() } else { None })
    }

    /// Parses the next record into `out` (a reader's own buffer: nothing is moved per record,
    /// and the reader may hold it while it borrows itself); `Ok(false)` at the end.
    pub fn next_into(&mut self, out: &mut Record) -> Result<bool> {
        Ok(self.advance(out)?.is_some())
    }

    /// [`Walker::next_into`]'s walk: `Some(())` once `out` holds the next record (`None` at the
    /// end, as `finish` and `live_tail` give it).
    fn advance(&mut self, out: &mut Record) -> Result<Option<()>> {
        loop {
            let Some(lsa) = self.next else { return Ok(None) };
            if let Some(end) = self.end {
                if lsa >= end && lsa.offset >= 0 {
                    return self.finish(Some(lsa), EndReason::Requested);
                }
            }
            if lsa.offset < 0 {
                let first = match self.first_record_from(lsa.pageid) {
                    Err(LogError::Checksum { .. }) if self.live => return self.live_tail(lsa),
                    other => other?,
                };
                match first {
                    Some(l) => {
                        self.next = Some(l);
                        continue;
                    }
                    None if self.live => return self.live_tail(lsa),
                    None => {
                        let reason = if self.log.active_volume().is_none() {
                            EndReason::EndOfVolumes
                        } else {
                            EndReason::Unwritten
                        };
                        return self.finish(Some(Lsa::new(lsa.pageid, 0)), reason);
                    }
                }
            }
            self.release_behind(lsa.pageid);
            let beyond = lsa >= self.must_exist_until;
            let mut parsed = parse_record_into(&*self.log, lsa, out);
            // A record followed by one on an archived page was written whole before it was
            // archived: the checks of a page being written are not needed (most of a long
            // log lies in archives, and they cost a third of a walk).
            if self.live && !(parsed.is_ok() && self.archived(out)) {
                let sealed = match &parsed {
                    Ok(()) => self.sealed(out)?,
                    Err(_) => false,
                };
                match &parsed {
                    Ok(()) if sealed => {
                        // Read again now that what follows is written: a record half copied
                        // when first read is complete now.
                        let forw = out.forw_lsa;
                        parsed = parse_record_into(&*self.log, lsa, out);
                        if !(parsed.is_ok() && out.forw_lsa == forw) {
                            return self.live_tail(lsa);
                        }
                    }
                    Ok(_) | Err(ParseProblem::EndMarker) | Err(ParseProblem::NullForward) => {
                        return self.live_tail(lsa)
                    }
                    Err(ParseProblem::Page { problem: PageProblem::BadChecksum { .. }, .. }) => {
                        return self.live_tail(lsa)
                    }
                    Err(ParseProblem::Page { problem: PageProblem::Absent(_), .. }) | Err(ParseProblem::Invalid(_))
                        if beyond =>
                    {
                        return self.live_tail(lsa)
                    }
                    // Beyond every volume of the set (no active volume): the page is in an
                    // archive or active volume not copied into the directory yet.
                    Err(ParseProblem::Page { problem: PageProblem::Absent(Absent::NoVolume), .. }) => {
                        return self.live_tail(lsa)
                    }
                    Err(ParseProblem::Page { problem: PageProblem::Absent(_), .. }) if self.absent_at != Some(lsa) => {
                        self.absent_at = Some(lsa);
                        return self.live_tail(lsa); // a stale snapshot: look again in a fresh one
                    }
                    _ => {} // below the header's append position: as for a finished log
                }
            }
            match parsed {
                Ok(()) => {
                    self.last_lsa = Some(lsa);
                    self.next = Some(out.forw_lsa);
                    return Ok(Some(()));
                }
                Err(ParseProblem::EndMarker) if beyond => return self.finish(Some(lsa), EndReason::EndMarker),
                Err(ParseProblem::EndMarker) => {
                    return Err(LogError::corrupt(
                        self.log.volume_name(self.log.active_volume().unwrap_or(0)),
                        lsa,
                        format!("an end-of-log marker before the end the header records ({})", self.must_exist_until),
                    ));
                }
                Err(ParseProblem::ArchivedMarker { .. }) => {
                    // The engine goes on at the next page here, as the walk does; whatever the
                    // rest of the page held is not read, so the skip is counted, end marker or
                    // not (an archived end marker is legitimate only under a record longer
                    // than the whole active log, which is lost to the engine too).
                    self.unplaced.push(lsa);
                    self.next = Some(Lsa::new(lsa.pageid + 1, -1));
                }
                Err(ParseProblem::Page { pageid, problem: PageProblem::Encrypted { vol }, .. }) => {
                    if self.on_encrypted == OnEncrypted::Raise {
                        return Err(LogError::Encrypted {
                            file: self.log.volume_name(vol).to_string(),
                            lsa: Some(lsa),
                            pageid,
                        });
                    }
                    match self.skip_encrypted(lsa, pageid)? {
                        Some(r) => self.next = Some(r),
                        None => {
                            // The end marker itself is encrypted: only a clean shutdown's header knows the end.
                            let end = self.log.header().filter(|h| h.is_shutdown).map(|h| h.append_lsa);
                            return self.finish(end, EndReason::EncryptedTail);
                        }
                    }
                }
                Err(ParseProblem::Page {
                    problem: PageProblem::Absent(Absent::NoVolume), header_page: true, ..
                }) if self.log.active_volume().is_none() => {
                    return self.finish(Some(lsa), EndReason::EndOfVolumes);
                }
                Err(ParseProblem::Page {
                    problem: PageProblem::Absent(Absent::Overwritten { .. }),
                    header_page: true,
                    ..
                }) if beyond => {
                    return self.finish(Some(lsa), EndReason::Unwritten);
                }
                Err(ParseProblem::Page { problem: PageProblem::BadChecksum { .. }, .. })
                | Err(ParseProblem::NullForward)
                | Err(ParseProblem::Invalid(_))
                    if beyond && self.torn_tail_possible() =>
                {
                    return self.finish(Some(lsa), EndReason::Torn);
                }
                Err(ParseProblem::Page {
                    problem: PageProblem::Absent(Absent::Overwritten { .. }),
                    header_page: false,
                    ..
                }) if beyond => {
                    return self.finish(Some(lsa), EndReason::Torn);
                }
                Err(p) => return Err(self.log.problem_error(p, lsa)),
            }
        }
    }

    /// Pages after the one holding `end`, within one turn of the ring, whose first record reads.
    fn readable_beyond(&self, end: Lsa) -> Result<Option<BeyondEnd>> {
        let end_page = end.pageid;
        let Some(header) = self.log.header() else { return Ok(None) };
        let ring = header.npages as i64;
        let mut found: Option<BeyondEnd> = None;
        for q in end_page + 1..end_page + ring {
            let p = match self.log.fetch(q) {
                Fetch::Ok(p) => p,
                Fetch::Failed(e) => return Err(e.at(Lsa::new(q, 0), q)),
                _ => continue,
            };
            if p.header.offset < 0 {
                continue;
            }
            let lsa = Lsa::new(q, p.header.offset);
            if self.log.parse_record(lsa).is_ok() {
                match &mut found {
                    Some(b) => b.pages += 1,
                    None => found = Some(BeyondEnd { end_lsa: end, first_lsa: lsa, pages: 1 }),
                }
            }
        }
        Ok(found)
    }

    /// A crash can leave a torn tail only in a log that was not shut down cleanly.
    fn torn_tail_possible(&self) -> bool {
        self.log.header().map(|h| !h.is_shutdown).unwrap_or(false)
    }
}

impl<S: LogSource + ?Sized + 'static> Iterator for Walker<S> {
    type Item = Result<Record>;
    fn next(&mut self) -> Option<Result<Record>> {
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => None,
            Err(e) => {
                self.next = None;
                Some(Err(e))
            }
        }
    }
}

/// A start LSA must be where a record starts: one of the records that start on its page.
pub fn validate_record_start<S: LogSource + ?Sized>(log: &S, lsa: Lsa) -> Result<()> {
    if lsa.pageid < log.first_pageid() {
        return Err(LogError::MissingArchive {
            file: log.set_name(),
            lsa: Some(lsa),
            msg: format!(
                "LSA {lsa} lies before the oldest page of the set ({}): its archive is not available",
                log.first_pageid()
            ),
        });
    }
    let page = match log.fetch(lsa.pageid) {
        Fetch::Ok(p) => p,
        Fetch::Absent(Absent::Overwritten { .. } | Absent::NoVolume)
            if log.header().is_none_or(|h| lsa.pageid > h.append_lsa.pageid) =>
        {
            return Err(LogError::BadPosition {
                file: log.set_name(),
                lsa,
                msg: format!("LSA {lsa} lies beyond the end of the log"),
            });
        }
        other => return Err(log.fetch_error(other, lsa.pageid, lsa)),
    };
    let area = log.area_size();
    let mut off = page.header.offset;
    let mut steps = 0;
    while off >= 0 && (off as usize) + 32 <= area && steps < area {
        if off == lsa.offset {
            return Ok(());
        }
        if off > lsa.offset {
            break;
        }
        let forw = lsa_at(page.bytes, PAGE_HEADER_SIZE + off as usize + FORW_LSA_AT);
        if forw.is_null() || forw.pageid != lsa.pageid || forw.offset <= off {
            break;
        }
        off = forw.offset;
        steps += 1;
    }
    Err(LogError::BadPosition {
        file: log.volume_name(page.vol).to_string(),
        lsa,
        msg: format!("no record starts at LSA {lsa}"),
    })
}

/// Where the log ends, found by walking (the header's append LSA is stale after a crash).
#[derive(Clone, Debug)]
pub struct EndOfLog {
    /// The LSA after the last record: where the next record would go. `None` when encrypted
    /// pages hide the end and the header cannot vouch for it.
    pub end_lsa: Option<Lsa>,
    pub reason: EndReason,
    /// The last record of the log, when it is readable.
    pub last_lsa: Option<Lsa>,
    pub skipped: Vec<SkippedRange>,
}

/// Walks from the last checkpoint (or the first record) to the true end of the log.
pub fn find_end<S: LogSource + ?Sized + 'static>(log: &Arc<S>) -> Result<EndOfLog> {
    find_end_from(log, None)
}

/// As [`find_end`], walking from `from` (a record start known to lie before the end) where it
/// lies after the header's checkpoint.
pub fn find_end_from<S: LogSource + ?Sized + 'static>(log: &Arc<S>, from: Option<Lsa>) -> Result<EndOfLog> {
    let chkpt = log.header().map(|h| h.chkpt_lsa).filter(|l| !l.is_null() && l.pageid >= log.first_pageid());
    let start = match (chkpt, from) {
        (Some(c), Some(f)) => Some(c.max(f)),
        (c, f) => f.or(c),
    };
    let mut w = Walker::new(log.clone(), start, None, OnEncrypted::Skip)?;
    while w.next_ref()?.is_some() {}
    let reason = w.end_reason.unwrap_or(EndReason::EndMarker);
    let mut last_lsa = w.last_lsa;
    if last_lsa.is_none() && reason == EndReason::EndMarker {
        // The walk started on the marker itself: its back_lsa names the last record.
        if let Some(end) = w.end_lsa {
            match log.fetch(end.pageid) {
                Fetch::Ok(p) => {
                    let back = lsa_at(p.bytes, PAGE_HEADER_SIZE + end.offset as usize + BACK_LSA_AT);
                    last_lsa = (!back.is_null()).then_some(back);
                }
                Fetch::Failed(e) => return Err(e.at(end, end.pageid)),
                _ => {}
            }
        }
    }
    Ok(EndOfLog { end_lsa: w.end_lsa, reason, last_lsa, skipped: w.skipped })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::testkit::writer::{DataFields, LogWriter, WriterConfig};

    /// Resident bytes of this process's maps of files under `dir` (from /proc/self/smaps).
    fn resident_under(dir: &std::path::Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut ours = false;
        let mut kb = 0;
        for line in smaps.lines() {
            if let Some(first) = line.split_whitespace().next() {
                if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                    ours = line.contains(dir.to_str().unwrap());
                    continue;
                }
            }
            if ours && line.starts_with("Rss:") {
                kb += line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
            }
        }
        kb * 1024
    }

    /// A forward walk keeps at most about twice its window (`keep_mapped_pages`) of the log
    /// resident, however long the log: the pages it has passed are released.
    #[test]
    fn a_walk_keeps_resident_memory_bounded() {
        let cfg = WriterConfig { page_size: 16384, active_pages: 1024, archive_pages: 1024, ..WriterConfig::default() };
        let dir = tempfile::tempdir().unwrap();
        let mut w = LogWriter::streaming(cfg, dir.path()).unwrap();
        let body = vec![7u8; 8000];
        let fields = DataFields { rcvindex: 1, ..DataFields::default() };
        let mut n = 0;
        while w.end_lsa().pageid < 4_000 {
            // 64 MiB of log
            w.append(1, crate::format::rectype::LOG_REDO_DATA, &fields, &[], &body, false, false).unwrap();
            n += 1;
        }
        w.finish(dir.path()).unwrap();
        let log = Arc::new(LogSet::open(&[dir.path()]).unwrap());
        let mut walk = Walker::new(log, None, None, OnEncrypted::Raise).unwrap();
        walk.keep_mapped_pages = 256; // 4 MiB, so that a small log shows it
        let (mut seen, mut peak) = (0, 0);
        while let Some(rec) = walk.next_record().unwrap() {
            std::hint::black_box(rec.lsa);
            seen += 1;
            if seen % 200 == 0 {
                peak = peak.max(resident_under(dir.path()));
            }
        }
        assert_eq!(seen, n);
        assert!(peak > 0, "the volumes are mapped");
        // The kernel maps file pages by folios of up to 2 MiB: each of the 5 volumes may hold
        // one mapped from the open (headers) besides the window.
        assert!(peak <= 24 << 20, "{} MiB of a 64 MiB log resident", peak >> 20);
    }
}
