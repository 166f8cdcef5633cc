//! Seed corpora for the fuzz targets, cut from real logs:
//! `cargo run --example fuzz_seeds --features fuzzing -- OUT_DIR LOG_DIR...` writes
//! `OUT_DIR/<target>/<n>` files: supplemental payloads (kind byte first), zipped payloads as
//! stored, and class records paired with rows of their tables. (Log-level seeds are small logs
//! from the test writer and windows of the fixtures: `fuzz/make_seeds.py`.)

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use walcdc_core::cdc::changes::ChangeReader;
use walcdc_core::cdc::options::ChangeOptions;
use walcdc_core::format::class_record::looks_like_class_record;
use walcdc_core::format::rectype::LOG_SUPPLEMENTAL_INFO;
use walcdc_core::format::supplemental::Oid;
use walcdc_core::log::logset::LogSet;
use walcdc_core::log::walker::OnEncrypted;
use walcdc_core::log::walker::Walker;

/// Seeds per target and kind (supplement type, table) in each log: variety over volume.
const PER_KIND_PER_LOG: usize = 25;

struct Out {
    dir: PathBuf,
    seen: HashSet<Vec<u8>>,
    counts: HashMap<(&'static str, u64), usize>,
}

impl Out {
    fn put(&mut self, target: &'static str, kind: u64, data: Vec<u8>) {
        let n = self.counts.entry((target, kind)).or_default();
        if *n >= PER_KIND_PER_LOG || data.len() > 1 << 17 || !self.seen.insert(data.clone()) {
            return;
        }
        *n += 1;
        let dir = self.dir.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        let name = format!("{:016x}", fxhash(&data));
        std::fs::write(dir.join(name), data).unwrap();
    }
}

fn fxhash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf29ce484222325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x100000001b3))
}

fn seeds_of(log_dir: &Path, out: &mut Out) {
    out.counts.clear();
    let log = Arc::new(LogSet::open(&[log_dir]).expect("open log"));
    let mut classes: HashMap<Oid, Vec<u8>> = HashMap::new();
    let (mut undo, mut redo, mut scratch) = (Vec::new(), Vec::new(), Vec::new());
    let walker = Walker::new(log.clone(), None, None, OnEncrypted::Skip).unwrap();
    for rec in walker {
        let Ok(rec) = rec else { break };
        for p in [&rec.undo, &rec.redo] {
            if p.zipped && p.stored_len > 0 {
                if let Ok(b) = log.stored_bytes(p, &mut scratch) {
                    out.put("payload", rec.rectype as u64, b.to_vec());
                }
            }
        }
        if log.images(&rec, &mut undo, &mut redo).is_err() {
            continue;
        }
        if rec.rectype == LOG_SUPPLEMENTAL_INFO {
            if let Some(kind) = rec.supplement_type() {
                let mut s = vec![(kind + 2) as u8];
                s.extend_from_slice(if redo.is_empty() { &undo } else { &redo });
                out.put("supplemental", kind as u64, s);
            }
        } else if redo.len() > 2 && looks_like_class_record(&redo[2..]) {
            if let Some(oid) = rec.data_oid() {
                classes.insert(oid, redo[2..].to_vec());
            }
        }
    }
    let opts = ChangeOptions { decode: false, on_encrypted: OnEncrypted::Skip, ..Default::default() };
    let mut reader = ChangeReader::new(log.clone(), opts).unwrap();
    while let Ok(Some(e)) = reader.next_event() {
        let Some(class) = e.class_oid.and_then(|c| classes.get(&c)) else { continue };
        for image in [&e.before, &e.after].into_iter().flatten() {
            let mut s = (class.len() as u16).to_le_bytes().to_vec();
            s.extend_from_slice(class);
            s.extend_from_slice(&image.row);
            out.put("class_and_row", e.class_oid.map_or(0, |c| c.to_cdc()), s);
        }
    }
    let mut per_target: HashMap<&str, usize> = HashMap::new();
    for ((t, _), n) in &out.counts {
        *per_target.entry(t).or_default() += n;
    }
    eprintln!("{}: {:?}", log_dir.display(), per_target);
}

/// Windows of a real active volume as small logs of their own: `k` consecutive ring pages
/// behind a copy of the header page that names them as its whole ring (a crashed log, so the
/// cut end reads as a torn tail). Real record mixes for the log-level targets.
fn windows_of(log_dir: &Path, out: &mut Out, k: usize, count: usize) {
    let Ok(entries) = std::fs::read_dir(log_dir) else { return };
    let Some(active) = entries.flatten().map(|e| e.path()).find(|p| p.to_string_lossy().ends_with("_lgat")) else {
        return;
    };
    let bytes = std::fs::read(&active).unwrap();
    let log = LogSet::open(&[&active]).expect("open active volume");
    let ps = log.page_size;
    let slots = bytes.len() / ps - 1;
    let mut made = 0;
    for i in 0..count * 4 {
        if made == count {
            break;
        }
        let first_slot = 1 + (i * 7919) % slots.saturating_sub(k).max(1);
        let pages: Vec<&[u8]> = (0..k).map(|j| &bytes[(first_slot + j) * ps..(first_slot + j + 1) * ps]).collect();
        let ids: Vec<i64> =
            pages.iter().map(|p| walcdc_core::format::page::PageHeader::parse(p).logical_pageid).collect();
        if ids[0] < 0 || ids.windows(2).any(|w| w[1] != w[0] + 1) {
            continue;
        }
        let first = ids[0];
        let first_off = walcdc_core::format::page::PageHeader::parse(pages[0]).offset;
        let mut header = bytes[..ps].to_vec();
        let h = walcdc_core::format::page::PAGE_HEADER_SIZE;
        let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| b[h + at..h + at + v.len()].copy_from_slice(v);
        put(&mut header, 64, &[0]); // is_shutdown: no
        put(&mut header, 88, &(k as i32).to_le_bytes());
        put(&mut header, 96, &first.to_le_bytes());
        let lsa = |p: i64, o: i16| walcdc_core::format::lsa::Lsa::new(p, o).to_raw().to_le_bytes();
        put(&mut header, 104, &lsa(first + k as i64 - 1, 0));
        put(&mut header, 112, &if first_off >= 0 { lsa(first, first_off) } else { [0xff; 8] });
        put(&mut header, 120, &first.to_le_bytes());
        put(&mut header, 128, &1i32.to_le_bytes());
        walcdc_core::format::page::set_checksum(&mut header);
        let mut active_bytes = header;
        for p in &pages {
            active_bytes.extend_from_slice(p);
        }
        if LogSet::from_memory(vec![("fz_lgat".into(), active_bytes.clone())]).is_err() {
            continue;
        }
        let input = walcdc_core::fuzzing::input_from_volumes(None, Some(&active_bytes), ps);
        out.put("logset", i as u64, input.clone());
        out.put("changes", i as u64, input.clone());
        let mut from = walcdc_core::format::lsa::Lsa::new(first + 1, 0).to_key().to_le_bytes().to_vec();
        from.extend_from_slice(&input);
        out.put("walk_from", i as u64, from);
        made += 1;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, logs) = args.split_first().expect("usage: fuzz_seeds OUT_DIR LOG_DIR...");
    let mut out = Out { dir: PathBuf::from(dir), seen: HashSet::new(), counts: HashMap::new() };
    for l in logs {
        seeds_of(Path::new(l), &mut out);
        windows_of(Path::new(l), &mut out, 5, 12);
    }
}
