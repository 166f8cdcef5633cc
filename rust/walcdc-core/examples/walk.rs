//! Walks a log set and prints what it found, for profiling:
//! `cargo run --release --example walk -- DIR [--records] [--repeat N]`. With `--records` the
//! walk fills the Arrow columns of `records()` (batches of 65,536 rows), as the Python method does.
use std::sync::Arc;
use std::time::Instant;

use walcdc_core::arrow::records_arrow::{next_batch, RecordsBuilder};
use walcdc_core::log::logset::LogSet;
use walcdc_core::log::walker::OnEncrypted;
use walcdc_core::log::walker::Walker;

/// The Python extension's allocator (walcdc-py's lib.rs); run with `MIMALLOC_PURGE_DELAY=250`
/// for the purge delay the extension sets (freed memory kept 250 ms for the next batches).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let records = args.iter().any(|a| a == "--records");
    let repeat =
        args.iter().position(|a| a == "--repeat").and_then(|i| args.get(i + 1)).map_or(Ok(1), |n| n.parse())?;
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with("--") && a.parse::<u64>().is_err()).collect();
    let log = Arc::new(LogSet::open(&paths)?);
    for _ in 0..repeat {
        let t = Instant::now();
        let mut w = Walker::new(log.clone(), None, None, OnEncrypted::Skip)?;
        let mut n = 0u64;
        if records {
            let mut builder = RecordsBuilder::new(&*log, false);
            while let Some(b) = next_batch(&mut w, &mut builder, 65536)? {
                n += b.num_rows() as u64;
            }
        } else {
            while w.next_ref()?.is_some() {
                n += 1;
            }
        }
        println!(
            "records {n} in {:.3} s; end {:?} reason {:?} skipped {:?}",
            t.elapsed().as_secs_f64(),
            w.end_lsa,
            w.end_reason,
            w.skipped
        );
    }
    Ok(())
}
