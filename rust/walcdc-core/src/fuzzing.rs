//! Fuzz targets: one function per decoder, each taking arbitrary bytes. The `fuzz/` crate
//! (cargo-fuzz) calls them, and `cargo test` replays every input kept under
//! `fuzz/regressions/` through them, so a crash once found stays fixed on stable Rust too.
//!
//! Every target must return normally for every input: a panic, a hang or a huge allocation is
//! a defect. Targets also check the invariants a caller relies on (a forward walk only moves
//! forward; an error names its file).
//!
//! Log-level targets read their input as a small log set (see [`log_from_input`]); the page
//! checksums are recomputed unless the input asks otherwise, so that mutations reach the
//! decoders behind the checksum instead of stopping at it.

use std::sync::Arc;

use crate::arrow::changes_arrow::{next_changes_batch, ChangesBuilder};
use crate::arrow::records_arrow::{next_batch, RecordsBuilder};
use crate::cdc::changes::{ChangeReader, ReaderState};
use crate::cdc::options::ChangeOptions;
use crate::cdc::options::ImageMode;
use crate::error::LogError;
use crate::format::lsa::Lsa;
use crate::format::page::{set_checksum, PAGE_HEADER_SIZE};
use crate::format::supplemental::Oid;
use crate::log::logset::LogSet;
use crate::log::payload::ReadPayloads;
use crate::log::payload::{undo_diff, unzip_into};
use crate::log::record::ReadRecords;
use crate::log::walker::{find_end, validate_record_start, OnEncrypted, Walker};

/// Input layout of the log-level targets:
/// - byte 0, flags: bit 0 keep the checksums as given; bits 1–2 layout (0 an active volume,
///   1 an archive then an active volume, 2 an archive alone); bits 3–4 the page size used to
///   recompute checksums (4096 << n);
/// - bytes 1..5 (layouts 1 and 2): the archive's length, u32 little-endian;
/// - the volumes' bytes.
pub const FLAG_KEEP_CHECKSUMS: u8 = 1;

/// The log set an input describes, or `None` when it does not describe one that opens.
pub fn log_from_input(data: &[u8]) -> Option<LogSet> {
    let (&flags, rest) = data.split_first()?;
    let page_size = 4096usize << ((flags >> 3) & 3).min(2);
    let layout = (flags >> 1) & 3;
    let mut volumes: Vec<(String, Vec<u8>)> = Vec::new();
    match layout {
        0 => volumes.push(("fz_lgat".into(), rest.to_vec())),
        _ => {
            let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            let body = &rest[4..];
            let (arv, act) = body.split_at(len.min(body.len()));
            // Named by the number its header gives, as CUBRID names archives.
            let num = if arv.len() >= PAGE_HEADER_SIZE + 60 {
                crate::format::le::i32_at(arv, PAGE_HEADER_SIZE + 56)
            } else {
                0
            };
            volumes.push((format!("fz_lgar{:03}", num.clamp(0, 999_999)), arv.to_vec()));
            if layout == 1 {
                volumes.push(("fz_lgat".into(), act.to_vec()));
            }
        }
    }
    if flags & FLAG_KEEP_CHECKSUMS == 0 {
        for (_, v) in &mut volumes {
            for page in v.chunks_exact_mut(page_size) {
                set_checksum(page);
            }
        }
    }
    match LogSet::from_memory(volumes) {
        Ok(l) => Some(l),
        Err(e) => {
            check_error(&e);
            None
        }
    }
}

/// An input in the layout of [`log_from_input`], from volumes (for building seed corpora).
pub fn input_from_volumes(archive: Option<&[u8]>, active: Option<&[u8]>, page_size: usize) -> Vec<u8> {
    let size_bits = (page_size.trailing_zeros().saturating_sub(12) as u8).min(2) << 3;
    let layout = match (archive, active) {
        (None, _) => 0,
        (Some(_), Some(_)) => 1,
        (Some(_), None) => 2,
    };
    let mut out = vec![size_bits | (layout << 1)];
    if let Some(a) = archive {
        out.extend_from_slice(&(a.len() as u32).to_le_bytes());
        out.extend_from_slice(a);
    }
    if let Some(a) = active {
        out.extend_from_slice(a);
    }
    out
}

/// An error must render a message (the Python tests check that errors from the log also name
/// the file and the LSA).
fn check_error(e: &LogError) {
    let text = e.to_string();
    assert!(!text.is_empty(), "an error with no message: {e:?}");
}

/// The log set: open, walk every record (with payloads, into Arrow batches), find the end,
/// and read the last record of each batch again by random access.
pub fn fuzz_logset(data: &[u8]) {
    let Some(log) = log_from_input(data) else { return };
    let log = Arc::new(log);
    let _ = find_end(&log).map_err(|e| check_error(&e));
    let Ok(mut walker) = Walker::new(log.clone(), None, None, OnEncrypted::Skip) else { return };
    let mut builder = RecordsBuilder::new(&*log, true);
    let mut starts = Vec::new();
    loop {
        let before = walker.last_lsa;
        match next_batch(&mut walker, &mut builder, 64) {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                check_error(&e);
                break;
            }
        }
        if let (Some(b), Some(now)) = (before, walker.last_lsa) {
            assert!(now > b, "the walk went back from {b} to {now}");
        }
        if let Some(l) = walker.last_lsa {
            if starts.last().is_none_or(|&p| l > p) {
                starts.push(l);
            }
        }
    }
    for &lsa in starts.iter().take(64) {
        if let Ok(rec) = log.record_at(lsa) {
            let (mut undo, mut redo) = (Vec::new(), Vec::new());
            let _ = log.images(&rec, &mut undo, &mut redo).map_err(|e| check_error(&e));
        }
        let _ = validate_record_start(&*log, lsa).map_err(|e| check_error(&e));
    }
}

/// The walk from an arbitrary LSA (the first 8 input bytes), and random access there.
pub fn fuzz_walk_from(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let raw = u64::from_le_bytes(data[..8].try_into().unwrap());
    let lsa = Lsa::new((raw >> 16) as i64, raw as u16 as i16);
    let Some(log) = log_from_input(&data[8..]) else { return };
    let log = Arc::new(log);
    if let Ok(rec) = log.record_at(lsa) {
        let (mut undo, mut redo) = (Vec::new(), Vec::new());
        let _ = log.images(&rec, &mut undo, &mut redo);
    }
    for checked in [false, true] {
        let w = if checked {
            Walker::checked(log.clone(), Some(lsa), None, OnEncrypted::Skip)
        } else {
            Walker::new(log.clone(), Some(lsa), None, OnEncrypted::Raise)
        };
        let Ok(w) = w else { continue };
        let mut prev: Option<Lsa> = None;
        for r in w {
            match r {
                Ok(rec) => {
                    if let Some(p) = prev {
                        assert!(rec.lsa > p, "the walk went back from {p} to {}", rec.lsa);
                    }
                    prev = Some(rec.lsa);
                }
                Err(e) => {
                    check_error(&e);
                    break;
                }
            }
        }
    }
}

/// Change events over a small log: both streams, typed decoding, Arrow batches, the state at
/// the end and a stream resumed from it.
pub fn fuzz_changes(data: &[u8]) {
    let Some(log) = log_from_input(data) else { return };
    let log = Arc::new(log);
    for committed_only in [true, false] {
        let opts = ChangeOptions {
            committed_only,
            mode: ImageMode::Full,
            on_encrypted: OnEncrypted::Skip,
            ..Default::default()
        };
        let Ok(mut reader) = ChangeReader::new(log.clone(), opts.clone()) else { continue };
        let mut builder = ChangesBuilder::new(&*log);
        loop {
            match next_changes_batch(&mut reader, &mut builder, 256) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    check_error(&e);
                    break;
                }
            }
        }
        if committed_only && reader.is_done() {
            let bytes = reader.state().map(|s| s.to_bytes()).unwrap_or_default();
            if let Ok(state) = ReaderState::from_bytes(&bytes) {
                if let Ok(mut again) = ChangeReader::from_state(log.clone(), opts.clone(), state) {
                    while let Ok(Some(_)) = again.next_event() {}
                }
            }
        }
        if committed_only {
            fuzz_ranges(&log, &opts);
        }
    }
}

/// The committed stream read range by range (`ChangeReader::for_range`, 2-page ranges: most
/// transactions are read back along their chains), with the catalog versions from every
/// class-tracker write and end record. With `WALCDC_FUZZ_ORACLE` set, a log both readers read
/// without error must give the same events (a local hunt for differences; CI's fuzzing only
/// asks for no panic, as damaged logs may legitimately differ where a chain is broken).
fn fuzz_ranges(log: &Arc<LogSet>, opts: &ChangeOptions) {
    use crate::cdc::parallel::{range_facts, CatalogInput, CatalogVersions, FactKind};
    let Ok(facts) = range_facts(log, None, None, OnEncrypted::Skip) else { return };
    let inputs: Vec<CatalogInput> = facts
        .facts
        .iter()
        .filter(|f| matches!(f.kind, FactKind::Commit | FactKind::Abort | FactKind::ClassWrite))
        .map(|f| CatalogInput::Record { lsa: f.lsa, end: None })
        .collect();
    let Ok(versions) = CatalogVersions::build(&**log, &inputs) else { return };
    let versions = Arc::new(versions);
    let mut ranged = Vec::new();
    for r in crate::log::ranges::split(log, 2) {
        let spec = crate::cdc::changes::RangeSpec {
            start: r.start,
            end: r.end,
            versions: versions.clone(),
            ..Default::default()
        };
        let Ok(mut reader) = ChangeReader::for_range(log.clone(), opts.clone(), spec) else { return };
        loop {
            match reader.next_event() {
                Ok(Some(e)) => ranged.push(e),
                Ok(None) => break,
                Err(e) => {
                    check_error(&e);
                    return;
                }
            }
        }
    }
    if std::env::var_os("WALCDC_FUZZ_ORACLE").is_none() {
        return;
    }
    let Ok(mut whole) = ChangeReader::new(log.clone(), opts.clone()) else { return };
    let mut one = Vec::new();
    loop {
        match whole.next_event() {
            Ok(Some(e)) => one.push(e),
            Ok(None) => break,
            Err(_) => return,
        }
    }
    let key = |e: &crate::cdc::event::Event| (e.lsa, e.op, e.commit_lsa, e.txn_seq, e.user.clone(), e.partial);
    let a: Vec<_> = ranged.iter().map(key).collect();
    let b: Vec<_> = one.iter().map(key).collect();
    assert_eq!(a, b, "range reads differ from the one-pass stream");
}

/// A stream state, or a cursor's catalog checkpoint, read back from bytes (what a user hands
/// to `read_changes(state=...)` or `read_changes(cursor=...)`).
pub fn fuzz_reader_state(data: &[u8]) {
    if let Ok(state) = ReaderState::from_bytes(data) {
        let again = state.to_bytes();
        let _ = ReaderState::from_bytes(&again).expect("a state's own bytes read back");
    }
    if let Ok(cp) = crate::cdc::catalog::CatalogCheckpoint::from_bytes(data) {
        let again = cp.to_bytes();
        let _ = crate::cdc::catalog::CatalogCheckpoint::from_bytes(&again).expect("a checkpoint's own bytes read back");
    }
}

/// Supplemental payloads: the first byte chooses the kind.
pub fn fuzz_supplemental(data: &[u8]) {
    let Some((&kind, payload)) = data.split_first() else { return };
    let _ = crate::format::supplemental::parse((kind % 24) as i32 - 2, payload);
}

/// Class records, and the row decoder against the schemas they define: a u16 length, the class
/// record, then a heap row decoded with each of its representations.
pub fn fuzz_class_and_row(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let len = u16::from_le_bytes([data[0], data[1]]) as usize;
    let rest = &data[2..];
    let (class_record, row) = rest.split_at(len.min(rest.len()));
    let _ = crate::format::class_record::looks_like_class_record(class_record);
    let Ok(class) =
        crate::format::class_record::parse_class_record(Oid { volid: 0, pageid: 1, slotid: 1 }, class_record)
    else {
        return;
    };
    let _ = crate::format::row::layout::record_repid(row);
    for rep in class.representations.values() {
        let _ = crate::format::row::layout::row_layout(rep, row);
        row_json_matches_values(rep, row);
        // The row's bytes read as one packed value of each of the first types (the DDL
        // stream's form); more would only repeat the work.
        for a in rep.attributes.iter().take(4) {
            let _ = crate::format::row::packed_value_json(row, &a.domain);
        }
    }
}

/// A column's JSON written from its bytes is the JSON of its value, and says the same of what
/// does not decode (texts compared where short: holding two long ones, or two decodings of the
/// row, would pass the bound on what the decoders may hold at a time).
fn row_json_matches_values(rep: &crate::format::schema::Representation, row: &[u8]) {
    let Ok(values) = crate::format::row::decode_row(rep, row) else { return };
    // Each column's JSON and why it does not decode, from its value (kept where short).
    let expected: Vec<(Option<String>, Option<String>)> = values
        .iter()
        .zip(&rep.attributes)
        .map(|(v, a)| {
            let _ = crate::format::row::text::value_text(v);
            let json = crate::format::row::text::value_json(v, &a.domain);
            ((json.len() <= 1 << 12).then_some(json), v.undecoded().map(str::to_owned))
        })
        .collect();
    drop(values);
    let mut room = crate::format::row::RowRoom::default();
    crate::format::row::layout::row_slots(rep, row, &mut room.slots).expect("a row that decodes has a layout");
    for ((a, slot), (json, reason)) in rep.attributes.iter().zip(&room.slots).zip(&expected) {
        let crate::format::row::layout::Slot::Bytes(r) = slot else { continue };
        let mut direct = String::new();
        let why = crate::format::row::column_json_into(&mut direct, &a.domain, &row[r.clone()], &mut room.text);
        room.text = Vec::new();
        if let Some(json) = json {
            assert_eq!(&direct, json, "column {}", a.name);
        }
        assert_eq!(&why, reason, "column {}", a.name);
    }
}

/// Payloads: LZ4 with CUBRID's length prefix, and DIFF redo over an undo image. The first byte
/// splits the rest into undo and redo.
pub fn fuzz_payload(data: &[u8]) {
    let mut out = Vec::new();
    let _ = unzip_into(data, &mut out);
    // LZ4 expands 255 times at most: no length prefix may cost more memory than that.
    assert!(out.len() <= (data.len() + 1) * 255, "{} bytes unzipped from {}", out.len(), data.len());
    if let Some((&cut, rest)) = data.split_first() {
        let (undo, redo) = rest.split_at((cut as usize).min(rest.len()));
        let mut redo = redo.to_vec();
        undo_diff(undo, &mut redo);
    }
}

/// Replays an input through the target named like its directory under `fuzz/regressions/`.
pub fn run_target(name: &str, data: &[u8]) -> bool {
    let f: fn(&[u8]) = match name {
        "logset" => fuzz_logset,
        "walk_from" => fuzz_walk_from,
        "changes" => fuzz_changes,
        "reader_state" => fuzz_reader_state,
        "supplemental" => fuzz_supplemental,
        "class_and_row" => fuzz_class_and_row,
        "payload" => fuzz_payload,
        _ => return false,
    };
    f(data);
    true
}

/// The targets, by name.
pub const TARGETS: [&str; 7] =
    ["logset", "walk_from", "changes", "reader_state", "supplemental", "class_and_row", "payload"];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every input kept under `fuzz/regressions/<target>/` (crashes once found) and
    /// `fuzz/seeds/<target>/` runs through its target without a panic.
    #[test]
    fn kept_inputs_run_clean() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        for target in TARGETS {
            let mut n = 0;
            for kind in ["seeds", "regressions"] {
                let Ok(dir) = std::fs::read_dir(root.join(kind).join(target)) else { continue };
                for entry in dir.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_file())) {
                    let data = std::fs::read(entry.path()).unwrap();
                    assert!(run_target(target, &data));
                    n += 1;
                }
            }
            assert!(n > 0, "no seeds for fuzz target {target}");
        }
    }

    #[test]
    fn page_header_is_inside_the_input_layout() {
        // A page smaller than its header never reaches the decoders.
        assert!(log_from_input(&[0; PAGE_HEADER_SIZE]).is_none());
    }
}

/// Memory bounds: every kept input, with each aligned word in turn set to values a length or
/// count field could lie with, runs through its target while the allocations of this thread
/// are counted. The peak must stay within a bound derived from the input's size, whatever the
/// fields say.
#[cfg(test)]
mod alloc_bounds {
    use super::*;
    use crate::alloc_count::peak_of;

    const LIES: [u32; 5] = [0x7FFF_FFFF, 0xFFFF_FFFF, 0x4000_0000, 0x0100_0000, 0x0001_0000];

    /// The largest peak over the edits of every kept input of `target` (every aligned word of
    /// the first 256 bytes, where headers and length fields lie, then every `stride` bytes), as
    /// a multiple of the input's size, after a fixed `allowance`.
    fn worst_ratio(target: &str, stride: usize, allowance: usize) -> (f64, usize) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds").join(target);
        let mut worst = (0.0f64, 0usize);
        for entry in std::fs::read_dir(root).unwrap().flatten() {
            let seed = std::fs::read(entry.path()).unwrap();
            let end = seed.len().saturating_sub(3);
            for at in (0..end.min(256)).step_by(4).chain((256..end).step_by(stride)) {
                for lie in LIES {
                    for bytes in [lie.to_le_bytes(), lie.to_be_bytes()] {
                        let mut data = seed.clone();
                        data[at..at + 4].copy_from_slice(&bytes);
                        let peak = peak_of(|| {
                            run_target(target, &data);
                        });
                        let ratio = peak.saturating_sub(allowance) as f64 / data.len() as f64;
                        if ratio > worst.0 {
                            worst = (ratio, peak);
                        }
                    }
                }
            }
        }
        worst
    }

    #[test]
    fn decoders_allocate_in_proportion_to_their_input() {
        // Class records with rows and supplemental payloads: a few times the input at most
        // (decoded values, names, JSON text), after 64 KiB for the decoders' own tables.
        for target in ["class_and_row", "supplemental"] {
            let (ratio, peak) = worst_ratio(target, 64, 64 << 10);
            assert!(ratio <= 16.0, "{target}: {peak} bytes at peak, {ratio:.1} times the input");
        }
        // Reader states: serde reserves at most 1 MiB per sequence whatever its length prefix
        // says, before the bytes run out; a few nested sequences stay within 4 MiB.
        let (ratio, peak) = worst_ratio("reader_state", 64, 4 << 20);
        assert!(ratio <= 16.0, "reader_state: {peak} bytes at peak, {ratio:.1} times the input");
        // LZ4 expands 255 times at most; a length prefix claiming more allocates nothing.
        let (ratio, peak) = worst_ratio("payload", 64, 64 << 10);
        assert!(ratio <= 256.0, "payload: {peak} bytes at peak, {ratio:.1} times the input");
    }

    #[test]
    fn log_sets_allocate_in_proportion_to_their_volumes() {
        // The volumes are copied once (memory-backed here; mapped from files otherwise); a
        // walk with payloads and the change streams add batches and images of the records.
        let (ratio, peak) = worst_ratio("logset", 4096, 1 << 20);
        assert!(ratio <= 24.0, "logset: {peak} bytes at peak, {ratio:.1} times the input");
    }
}
