//! The stateless part of change capture: one supplemental record to what it says (its
//! payload decoded), and a DML or DDL supplement to a candidate event with its row images
//! chased. No transaction state and no catalog: whether the event counts (commit, rollback),
//! whose it is and which table it names are decided by the caller — the change reader, or a
//! task that sees only its own range of the log.
use crate::cdc::chase;
use crate::cdc::event::{Event, Op};
use crate::cdc::options::OnError;
use crate::error::{LogError, Result};
use crate::format::supplemental::{self, DdlSupplement, DmlKind, DmlSupplement, Supplement};
use crate::log::payload::ReadPayloads;
use crate::log::record::Record;
use crate::log::source::LogSource;

/// Reusable buffers for decoding supplemental payloads.
#[derive(Default)]
pub struct Extractor {
    payload: Vec<u8>,
    scratch: Vec<u8>,
}

impl Extractor {
    /// The decoded payload of a `LOG_SUPPLEMENTAL_INFO` record.
    pub fn supplement(&mut self, log: &dyn LogSource, rec: &Record) -> Result<Supplement> {
        let kind = rec.supplement_type().unwrap_or(-1);
        log.payload_into(&rec.undo, &mut self.scratch, &mut self.payload)?;
        supplemental::parse(kind, &self.payload).map_err(|m| LogError::corrupt(&log.set_name(), rec.lsa, m))
    }
}

/// A supplemental record of a system transaction (trid 0 or below): CUBRID writes supplements
/// for user transactions only, so this is damage, which is said rather than skipped (skipping
/// would lose the change it stands for without a trace).
pub fn check_system_record(log: &dyn LogSource, rec: &Record) -> Result<()> {
    if rec.trid <= 0 && rec.rectype == crate::format::rectype::LOG_SUPPLEMENTAL_INFO {
        return Err(LogError::corrupt(
            &log.set_name(),
            rec.lsa,
            format!(
                "a supplemental record of system transaction {}: CUBRID writes them for user transactions only",
                rec.trid
            ),
        ));
    }
    Ok(())
}

/// The event's operation as the supplement states it (a chase may turn an update of an OID
/// reservation into an insert).
pub fn dml_op(dml: &DmlSupplement) -> Op {
    match dml.kind {
        DmlKind::Insert => Op::Insert,
        DmlKind::Update => Op::Update,
        DmlKind::Delete => Op::Delete,
    }
}

/// A DML candidate event with the images asked for. With `on_error = Skip` an image that cannot
/// be rebuilt leaves the event with the reason in `error`.
pub fn dml_event(
    log: &dyn LogSource,
    rec: &Record,
    dml: &DmlSupplement,
    want_before: bool,
    want_after: bool,
    on_error: OnError,
) -> Result<Event> {
    let op = dml_op(dml);
    let mut e = Event::at(rec, op);
    e.trigger = dml.trigger;
    e.class_oid = Some(dml.class_oid);
    // An update's after image is read in any case: only it tells an OID reservation apart.
    match chase::chase(log, rec, dml, want_before, want_after || op == Op::Update) {
        Ok(c) => {
            e.row_oid = c.row_oid;
            e.before = c.before;
            e.after = if want_after { c.after } else { None };
            if c.assign_address {
                e.op = Op::Insert;
                e.trigger = true;
            }
        }
        Err(err) if on_error == OnError::Skip => e.error = Some(err.to_string()),
        Err(err) => return Err(err),
    }
    Ok(e)
}

/// A DDL candidate event; passwords in the statement redacted when asked.
pub fn ddl_event(rec: &Record, mut ddl: DdlSupplement, redact: bool) -> Event {
    if redact {
        if let std::borrow::Cow::Owned(r) = crate::cdc::redact::redact_secrets(&ddl.statement) {
            ddl.statement = r;
        }
    }
    let mut e = Event::at(rec, Op::Ddl);
    e.class_oid = (!ddl.class_oid.is_null()).then_some(ddl.class_oid);
    e.ddl = Some(ddl);
    e
}
