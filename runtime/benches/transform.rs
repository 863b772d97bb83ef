//! Per-record cost of a Rust WASM transform through the host, called one
//! record at a time and in batches, against the same logic as a native Rust
//! closure, in the same run. Also the boundary alone (a pass-through
//! component against a native pass-through).
//!
//!     cargo bench -p sluice-runtime --bench transform
//!
//! Prints two tables; `BENCHMARKS.md` records them. Each time is the median
//! of several timed rounds. Beside each, the instructions per record that
//! `valgrind --tool=callgrind` counts for the same work (the bench runs
//! itself under it, one workload at a time, counting only inside
//! `counted_run`): stable where this shared machine's seconds are not.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_runtime::config::TransformLimits;
use sluice_runtime::metrics::Metrics;
use sluice_runtime::transform::wasm::{WasmHost, WasmTransform};
use sluice_sdk::Record;

#[path = "../../tests/fixtures/guest_build.rs"]
#[allow(dead_code)] // shared with the tests, which also build native plugins
mod guest_build;

mod common;
use common::{callgrind_collected, median, order};

const ROUNDS: usize = 7;
const RECORDS_PER_ROUND: usize = 20_000;
/// Records per workload under callgrind (after one warm-up batch).
const COUNTED_RECORDS: usize = 5_000;
/// Set in the bench's own child under callgrind: `workload:batch`.
const COUNT_ENV: &str = "SLUICE_BENCH_TRANSFORM_COUNT";
const REFERENCE_ENV: &str = "SLUICE_BENCH_REFERENCE_WASM";
const IDENTITY_ENV: &str = "SLUICE_BENCH_IDENTITY_WASM";

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

/// What is measured: a function from a batch to the records it returned.
#[derive(Clone, Copy, PartialEq)]
enum Workload {
    NativeReference,
    NativeIdentity,
    WasmReference,
    WasmIdentity,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::NativeReference => "native-reference",
            Workload::NativeIdentity => "native-identity",
            Workload::WasmReference => "wasm-reference",
            Workload::WasmIdentity => "wasm-identity",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [
            Workload::NativeReference,
            Workload::NativeIdentity,
            Workload::WasmReference,
            Workload::WasmIdentity,
        ]
        .into_iter()
        .find(|w| w.name() == name)
    }

    /// The batch function, with its component instance if it has one.
    fn runner(self, guests: &Guests) -> Box<dyn FnMut(Vec<Record>) -> usize> {
        match self {
            Workload::NativeReference => {
                Box::new(|b: Vec<Record>| b.into_iter().flat_map(native_reference).count())
            }
            Workload::NativeIdentity => Box::new(|b: Vec<Record>| b.len()),
            Workload::WasmReference | Workload::WasmIdentity => {
                let path = if self == Workload::WasmReference {
                    &guests.reference
                } else {
                    &guests.identity
                };
                let mut t = guests.instance(path);
                Box::new(move |b: Vec<Record>| {
                    t.transform_batch(b)
                        .into_iter()
                        .map(|r| r.unwrap().len())
                        .sum()
                })
            }
        }
    }
}

struct Guests {
    reference: PathBuf,
    identity: PathBuf,
    host: WasmHost,
    metrics: Metrics,
}

impl Guests {
    fn new(reference: PathBuf, identity: PathBuf) -> Self {
        let metrics = Metrics::new();
        let cache = std::env::temp_dir().join("sluice-bench-wasm-cache");
        let host = WasmHost::new(Some(cache), metrics.wasm_compilations.clone()).unwrap();
        Self {
            reference,
            identity,
            host,
            metrics,
        }
    }

    fn instance(&self, path: &Path) -> WasmTransform {
        let limits = TransformLimits::default();
        let module = self.host.load(path, &limits).expect("component loads");
        WasmTransform::new(
            &self.host,
            module,
            "bench",
            vec![],
            limits,
            self.metrics.transform("bench", 0, "bench"),
        )
        .expect("starts")
    }
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

/// The only code callgrind counts (`--toggle-collect`): the batches, not
/// making them.
#[inline(never)]
fn counted_run(run_batch: &mut dyn FnMut(Vec<Record>) -> usize, chunks: Vec<Vec<Record>>) -> usize {
    chunks.into_iter().map(run_batch).sum()
}

/// In the child under callgrind: one workload over `COUNTED_RECORDS`.
fn count_one(spec: &str) {
    let (name, batch) = spec.split_once(':').expect("workload:batch");
    let workload = Workload::parse(name).expect("a known workload");
    let batch: usize = batch.parse().expect("a batch size");
    let guests = Guests::new(
        std::env::var(REFERENCE_ENV).expect(REFERENCE_ENV).into(),
        std::env::var(IDENTITY_ENV).expect(IDENTITY_ENV).into(),
    );
    let mut run = workload.runner(&guests);
    let inputs: Vec<Record> = (0..COUNTED_RECORDS + batch).map(order).collect();
    run(inputs[..batch].to_vec());
    let chunks: Vec<Vec<Record>> = inputs[batch..].chunks(batch).map(|c| c.to_vec()).collect();
    let out = counted_run(&mut *run, chunks);
    assert_eq!(out, COUNTED_RECORDS, "every record came out");
}

/// Instructions per record of one workload, counted by callgrind in a
/// child of this bench; `Err` says why it could not be counted.
fn instructions(guests: &Guests, workload: Workload, batch: usize) -> Result<f64, String> {
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--toggle-collect=*counted_run*",
        ])
        .arg(std::env::current_exe().map_err(|e| e.to_string())?)
        .env(COUNT_ENV, format!("{}:{batch}", workload.name()))
        .env(REFERENCE_ENV, &guests.reference)
        .env(IDENTITY_ENV, &guests.identity)
        .output()
        .map_err(|e| format!("running valgrind: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("valgrind failed ({}): {stderr}", out.status));
    }
    let n = callgrind_collected(&stderr)?;
    Ok(n as f64 / COUNTED_RECORDS as f64)
}

struct Row {
    label: String,
    ns: f64,
    instructions: Result<f64, String>,
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing
    }
    if let Ok(spec) = std::env::var(COUNT_ENV) {
        count_one(&spec);
        return;
    }
    let reference =
        guest_build::build_guest("examples/transforms/rust", "sluice_example_transform.wasm");
    let identity = guest_build::build_guest("tests/guests", "sluice_test_chaos.wasm");
    let guests = Guests::new(reference, identity);
    let count = |workload: Workload, batch: usize| {
        let counted = instructions(&guests, workload, batch);
        if let Err(e) = &counted {
            eprintln!(
                "INSTRUCTIONS NOT COUNTED for {} at batches of {batch}: {e}",
                workload.name()
            );
        }
        counted
    };

    let mut reference_rows = Vec::new();
    let native = measure(Workload::NativeReference.runner(&guests), 1000);
    reference_rows.push(Row {
        label: "native Rust closure (baseline)".into(),
        ns: native,
        instructions: count(Workload::NativeReference, 1000),
    });
    for batch in [1, 10, 100, 1000] {
        let ns = measure(Workload::WasmReference.runner(&guests), batch);
        let label = if batch == 1 {
            "WASM, one record per call".to_string()
        } else {
            format!("WASM, batches of {batch}")
        };
        reference_rows.push(Row {
            label,
            ns,
            instructions: count(Workload::WasmReference, batch),
        });
    }
    let native_identity = measure(Workload::NativeIdentity.runner(&guests), 1000);
    let identity_instructions = count(Workload::NativeIdentity, 1000);
    let mut boundary_rows = Vec::new();
    for batch in [1, 100, 1000] {
        let ns = measure(Workload::WasmIdentity.runner(&guests), batch);
        let counted = count(Workload::WasmIdentity, batch);
        boundary_rows.push(Row {
            label: if batch == 1 {
                "one record per call".to_string()
            } else {
                format!("batches of {batch}")
            },
            ns: ns - native_identity,
            instructions: match (&counted, &identity_instructions) {
                (Ok(c), Ok(i)) => Ok(c - i),
                (Err(e), _) | (_, Err(e)) => Err(e.clone()),
            },
        });
    }

    let show = |i: &Result<f64, String>| match i {
        Ok(i) => format!("{i:.0}"),
        Err(_) => "NOT COUNTED".to_string(),
    };
    println!();
    println!(
        "Rust reference transform (parse JSON, uppercase a field, add a field), ~170-byte order records"
    );
    println!(
        "{:<36} {:>14} {:>16} {:>20} {:>18}",
        "", "ns per record", "ratio to native", "instructions/record", "instructions ratio"
    );
    let native_instructions = reference_rows[0].instructions.clone();
    for row in &reference_rows {
        let ratio = match (&row.instructions, &native_instructions) {
            (Ok(i), Ok(n)) => format!("{:.2}", i / n),
            _ => "-".into(),
        };
        println!(
            "{:<36} {:>14.0} {:>16.2} {:>20} {:>18}",
            row.label,
            row.ns,
            row.ns / native,
            show(&row.instructions),
            ratio
        );
    }
    println!();
    println!(
        "The boundary alone (pass-through component minus a native pass-through: {native_identity:.1} ns, {} instructions a record)",
        show(&identity_instructions)
    );
    println!(
        "{:<36} {:>14} {:>20}",
        "", "ns per record", "instructions/record"
    );
    for row in &boundary_rows {
        println!(
            "{:<36} {:>14.0} {:>20}",
            row.label,
            row.ns,
            show(&row.instructions)
        );
    }
    let target = Duration::from_nanos(250).as_nanos() as f64;
    let at_100 = boundary_rows[1].ns;
    println!(
        "\ntarget: the boundary at most {target:.0} ns a record at batches of 100: {} ({at_100:.0} ns)",
        if at_100 <= target { "met" } else { "NOT met" }
    );
    let best = reference_rows[1..]
        .iter()
        .map(|r| r.ns / native)
        .fold(f64::INFINITY, f64::min);
    println!(
        "target: the reference transform at most 2x native: {} (best {best:.2}x)",
        if best <= 2.0 { "met" } else { "NOT met" }
    );
}
