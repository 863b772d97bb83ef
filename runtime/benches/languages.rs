//! Per-record cost of the reference transform in every language
//! (`examples/transforms/<language>/`, each built from source by its
//! `build.sh`), through the host, in one run, as a ratio to the Rust
//! component: batches of 100 (the normal path) and one record per call.
//!
//!     cargo bench -p sluice-runtime --bench languages
//!
//! Needs every toolchain (`scripts/wasm-toolchains.sh`). Prints a table;
//! `BENCHMARKS.md` records it. Each figure is the median of several rounds.

use std::time::Instant;

use sluice_runtime::config::TransformLimits;
use sluice_runtime::metrics::Metrics;
use sluice_runtime::transform::wasm::{WasmHost, WasmTransform};
use sluice_sdk::Record;

#[path = "../../tests/fixtures/guest_build.rs"]
#[allow(dead_code)] // shared with the tests, which also build native plugins
mod guest_build;

mod common;
use common::{median, order};

const ROUNDS: usize = 5;
const RECORDS_PER_ROUND: usize = 5_000;

/// Nanoseconds per record through `t`, in batches of `batch`.
fn measure(t: &mut WasmTransform, batch: usize) -> f64 {
    let inputs: Vec<Record> = (0..RECORDS_PER_ROUND).map(order).collect();
    let run = |t: &mut WasmTransform, records: Vec<Record>| -> usize {
        t.transform_batch(records)
            .into_iter()
            .map(|r| r.expect("the reference transform maps every order").len())
            .sum()
    };
    run(t, inputs[..batch].to_vec()); // warm up
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let chunks: Vec<Vec<Record>> = inputs.chunks(batch).map(|c| c.to_vec()).collect();
        let started = Instant::now();
        let out: usize = chunks.into_iter().map(|c| run(t, c)).sum();
        let elapsed = started.elapsed();
        assert_eq!(out, RECORDS_PER_ROUND, "every record came out");
        rounds.push(elapsed.as_nanos() as f64 / RECORDS_PER_ROUND as f64);
    }
    median(rounds)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing
    }
    let metrics = Metrics::new();
    let cache = std::env::temp_dir().join("sluice-bench-wasm-cache");
    let host = WasmHost::new(Some(cache), metrics.wasm_compilations.clone()).unwrap();
    let limits = TransformLimits::default();
    let mut rows = Vec::new();
    for language in guest_build::LANGUAGES {
        let path = guest_build::build_language(language);
        let size = std::fs::metadata(&path).unwrap().len();
        let module = host.load(&path, &limits).expect("component loads");
        let mut t = WasmTransform::new(
            &host,
            module,
            "bench",
            vec![],
            limits,
            metrics.transform("bench", 0, language),
        )
        .expect("starts");
        let batched = measure(&mut t, 100);
        let single = measure(&mut t, 1);
        eprintln!("{language}: {batched:.0} ns/record batched, {single:.0} one per call");
        rows.push((language, size, batched, single));
    }
    let (rust_batched, rust_single) = (rows[0].2, rows[0].3);
    println!();
    println!(
        "Reference transform per language, ~170-byte order records, ns per record (ratio to Rust)"
    );
    println!(
        "{:<16} {:>12} {:>20} {:>24}",
        "language", "component", "batches of 100", "one record per call"
    );
    for (language, size, batched, single) in rows {
        println!(
            "{language:<16} {:>9} KB {:>11.0} ({:>5.2}x) {:>15.0} ({:>5.2}x)",
            size / 1024,
            batched,
            batched / rust_batched,
            single,
            single / rust_single
        );
    }
}
