//! Walks a log set and prints what it found: `cargo run --release --example walk -- DIR`.
use std::sync::Arc;

use walcdc_core::log::logset::LogSet;
use walcdc_core::log::walker::OnEncrypted;
use walcdc_core::log::walker::Walker;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    let log = Arc::new(LogSet::open(&paths)?);
    let mut w = Walker::new(log.clone(), None, None, OnEncrypted::Skip)?;
    let mut n = 0u64;
    let mut first = None;
    while let Some(r) = w.next_record()? {
        first.get_or_insert(r.lsa);
        n += 1;
    }
    println!(
        "records {n} first {:?} last {:?} end {:?} reason {:?} skipped {:?}",
        first, w.last_lsa, w.end_lsa, w.end_reason, w.skipped
    );
    Ok(())
}
