//! Reads the committed change stream of a log set into Arrow batches, for profiling:
//! `cargo run --release --example changes -- DIR [--decode] [--repeat N] [--table CLASS_OID]`.
use std::sync::Arc;
use std::time::Instant;

use walcdc_core::arrow::changes_arrow::{next_changes_batch, ChangesBuilder};
use walcdc_core::cdc::changes::ChangeReader;
use walcdc_core::cdc::options::ChangeOptions;
use walcdc_core::log::logset::LogSet;
use walcdc_core::log::walker::OnEncrypted;

/// The Python extension's allocator (walcdc-py's lib.rs); run with `MIMALLOC_PURGE_DELAY=250`
/// for the purge delay the extension sets (freed memory kept 250 ms for the next batches).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let decode = args.iter().any(|a| a == "--decode");
    let repeat =
        args.iter().position(|a| a == "--repeat").and_then(|i| args.get(i + 1)).map_or(Ok(1), |n| n.parse())?;
    let table: Option<u64> =
        args.iter().position(|a| a == "--table").and_then(|i| args.get(i + 1)).map(|n| n.parse()).transpose()?;
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with("--") && a.parse::<u64>().is_err()).collect();
    let log = Arc::new(LogSet::open(&paths)?);
    for _ in 0..repeat {
        let t = Instant::now();
        let tables = table.map(|t| [t].into_iter().collect());
        let opts = ChangeOptions { decode, tables, on_encrypted: OnEncrypted::Skip, ..Default::default() };
        let mut reader = ChangeReader::new(log.clone(), opts)?;
        let mut builder = ChangesBuilder::new(&*log);
        let mut events = 0;
        while let Some(b) = next_changes_batch(&mut reader, &mut builder, 65536)? {
            events += b.num_rows();
        }
        let s = &reader.stats;
        println!(
            "{events} events in {:.3} s ({} records walked, {} read by random access)",
            t.elapsed().as_secs_f64(),
            s.records,
            s.random_reads
        );
    }
    Ok(())
}
