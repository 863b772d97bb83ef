//! Per-record cost of a Rust WASM transform through the host, called one
//! record at a time and in batches, against the same logic as a native Rust
//! closure, in the same run. Also the boundary alone (a pass-through
//! component against a native pass-through).
//!
//!     cargo bench -p sluice-runtime --bench transform
//!
//! Prints a table; `BENCHMARKS.md` records it. Each figure is the median
//! of several timed rounds.

use std::time::{Duration, Instant};

use sluice_runtime::config::TransformLimits;
use sluice_runtime::metrics::Metrics;
use sluice_runtime::transform::wasm::{WasmHost, WasmTransform};
use sluice_sdk::Record;

#[path = "../../tests/fixtures/guest_build.rs"]
#[allow(dead_code)] // shared with the tests, which also build native plugins
mod guest_build;

mod common;
use common::{median, order};

const ROUNDS: usize = 7;
const RECORDS_PER_ROUND: usize = 20_000;

/// The reference transform's logic, natively.
fn native_reference(mut r: Record) -> Vec<Record> {
    let mut v: serde_json::Value = serde_json::from_slice(r.value.as_deref().unwrap()).unwrap();
    let o = v.as_object_mut().unwrap();
    if o.get("drop") == Some(&serde_json::Value::Bool(true)) {
        return vec![];
    }
    if let Some(serde_json::Value::String(s)) = o.get_mut("status") {
        *s = s.to_uppercase();
    }
    o.insert("processed_by".into(), "sluice".into());
    r.value = Some(serde_json::to_vec(&v).unwrap());
    vec![r]
}

/// Nanoseconds per record: median over rounds of `RECORDS_PER_ROUND`.
fn measure(mut run_batch: impl FnMut(Vec<Record>) -> usize, batch: usize) -> f64 {
    let inputs: Vec<Record> = (0..RECORDS_PER_ROUND).map(order).collect();
    // Warm up (instantiation, caches).
    run_batch(inputs[..batch].to_vec());
    let mut rounds = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let chunks: Vec<Vec<Record>> = inputs.chunks(batch).map(|c| c.to_vec()).collect();
        let started = Instant::now();
        let mut out = 0;
        for c in chunks {
            out += run_batch(c);
        }
        let elapsed = started.elapsed();
        assert_eq!(out, RECORDS_PER_ROUND, "every record came out");
        rounds.push(elapsed.as_nanos() as f64 / RECORDS_PER_ROUND as f64);
    }
    median(rounds)
}

fn wasm(
    host: &WasmHost,
    metrics: &Metrics,
    path: &std::path::Path,
    config: Vec<(String, String)>,
) -> WasmTransform {
    let limits = TransformLimits::default();
    let module = host.load(path, &limits).expect("component loads");
    WasmTransform::new(
        host,
        module,
        "bench",
        config,
        limits,
        metrics.transform("bench", 0, "bench"),
    )
    .expect("starts")
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing
    }
    let reference =
        guest_build::build_guest("examples/transforms/rust", "sluice_example_transform.wasm");
    let guests = guest_build::build_guest("tests/guests", "sluice_test_chaos.wasm");
    let metrics = Metrics::new();
    let cache = std::env::temp_dir().join("sluice-bench-wasm-cache");
    let host = WasmHost::new(Some(cache), metrics.wasm_compilations.clone()).unwrap();

    let mut rows: Vec<(String, f64, f64)> = Vec::new();
    let native = measure(|b| b.into_iter().flat_map(native_reference).count(), 1000);
    rows.push(("native Rust closure (baseline)".into(), native, 1.0));
    for batch in [1, 10, 100, 1000] {
        let mut t = wasm(&host, &metrics, &reference, vec![]);
        let ns = measure(
            |b| {
                t.transform_batch(b)
                    .into_iter()
                    .map(|r| r.unwrap().len())
                    .sum()
            },
            batch,
        );
        let label = if batch == 1 {
            "WASM, one record per call".to_string()
        } else {
            format!("WASM, batches of {batch}")
        };
        rows.push((label, ns, ns / native));
    }
    let native_identity = measure(|b| b.len(), 1000);
    let mut identity = wasm(&host, &metrics, &guests, vec![]);
    let boundary_1 = measure(
        |b| {
            identity
                .transform_batch(b)
                .into_iter()
                .map(|r| r.unwrap().len())
                .sum()
        },
        1,
    );
    let boundary_1000 = measure(
        |b| {
            identity
                .transform_batch(b)
                .into_iter()
                .map(|r| r.unwrap().len())
                .sum()
        },
        1000,
    );

    println!();
    println!(
        "Rust reference transform (parse JSON, uppercase a field, add a field), ~170-byte order records"
    );
    println!(
        "{:<36} {:>16} {:>18}",
        "", "ns per record", "ratio to native"
    );
    for (label, ns, ratio) in &rows {
        println!("{label:<36} {ns:>16.0} {ratio:>18.2}");
    }
    println!();
    println!(
        "The boundary alone (pass-through component; native pass-through: {native_identity:.1} ns/record)"
    );
    println!(
        "{:<36} {:>16.0}",
        "one record per call",
        boundary_1 - native_identity
    );
    println!(
        "{:<36} {:>16.0}",
        "batches of 1000",
        boundary_1000 - native_identity
    );
    let target = Duration::from_micros(1).as_nanos() as f64;
    println!(
        "\ntarget: with batching the boundary adds under {target:.0} ns per small record: {}",
        if boundary_1000 - native_identity < target {
            "met"
        } else {
            "NOT met"
        }
    );
}
