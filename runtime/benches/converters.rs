//! Per-record cost of the converters with schemas, reading (wire bytes to
//! schema and sink-form payload) and writing (the reverse), against
//! Kafka Connect's `JsonConverter` with `schemas.enable=true` in the same
//! run: Confluent's `AvroConverter`, `ProtobufConverter` and
//! `JsonSchemaConverter` (without and with `json.fail.invalid.schema`),
//! their schemas in the worker's
//! registry (in memory, ids cached after the first record, as in a task).
//!
//!     cargo bench -p sluice-runtime --bench converters
//!
//! Prints two tables: nanoseconds per record (median of rounds), and
//! instructions per record counted by callgrind (`valgrind` on the PATH;
//! the bench runs itself under it, once with a few records and once with
//! many, and divides the difference), which are stable where seconds are
//! not. `BENCHMARKS.md` records them.

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use sluice_runtime::config::{DecimalFormat, JsonSchemas, RegistryFormat, RegistrySettings};
use sluice_runtime::schema::registry::builtin::BuiltinRegistry;
use sluice_runtime::schema::{EnvelopeConverter, SchemaConverter};
use sluice_sdk::Schema;

const ROUNDS: usize = 7;
const RECORDS_PER_ROUND: usize = 20_000;
/// Records of the two callgrind runs (their difference is measured).
const FEW: usize = 200;
const MANY: usize = 2_200;

const CASES: [&str; 5] = [
    "JsonConverter",
    "AvroConverter",
    "ProtobufConverter",
    "JsonSchemaConverter",
    "JsonSchemaConverter+validation",
];

/// An order as a source gives it: a decimal, a timestamp, an optional
/// string among plain fields.
fn order_schema() -> Arc<Schema> {
    Arc::new(
        Schema::structure([
            ("order_id", Schema::int64()),
            ("customer_id", Schema::string()),
            ("amount", Schema::decimal(2)),
            ("currency", Schema::string()),
            ("status", Schema::string().optional()),
            ("updated_at", Schema::timestamp()),
        ])
        .named("shop.Order"),
    )
}

fn order_payload(i: usize) -> Vec<u8> {
    format!(
        r#"{{"order_id":{i},"customer_id":"cust-{:05}","amount":{}.{:02},"currency":"EUR","status":"shipped","updated_at":{}}}"#,
        i % 1000,
        10 + i % 500,
        i % 100,
        1_767_225_600_000u64 + i as u64
    )
    .into_bytes()
}

fn converter(case: &str) -> SchemaConverter {
    let registry = Arc::new(BuiltinRegistry::new(None).expect("in-memory registry"));
    let settings = |format, fail_invalid_schema| RegistrySettings {
        fail_invalid_schema,
        ..RegistrySettings::defaults(format)
    };
    use sluice_runtime::schema::{avro_converter, json_schema_converter, protobuf_converter};
    match case {
        "JsonConverter" => SchemaConverter::Json(EnvelopeConverter::new(JsonSchemas {
            decimal_format: DecimalFormat::Base64,
            replace_null_with_default: true,
            cache_size: 1000,
        })),
        "AvroConverter" => SchemaConverter::Avro(avro_converter::AvroConverter::new(
            registry,
            settings(RegistryFormat::Avro, false),
            false,
        )),
        "ProtobufConverter" => {
            SchemaConverter::Protobuf(protobuf_converter::ProtobufConverter::new(
                registry,
                settings(RegistryFormat::Protobuf, false),
                false,
            ))
        }
        "JsonSchemaConverter" => {
            SchemaConverter::JsonSchema(json_schema_converter::JsonSchemaConverter::new(
                registry,
                settings(RegistryFormat::JsonSchema, false),
                false,
            ))
        }
        "JsonSchemaConverter+validation" => {
            SchemaConverter::JsonSchema(json_schema_converter::JsonSchemaConverter::new(
                registry,
                settings(RegistryFormat::JsonSchema, true),
                false,
            ))
        }
        other => panic!("unknown case {other}"),
    }
}

/// Writes then reads `n` records; the time of each half, in ns per record.
async fn run(c: &SchemaConverter, schema: &Arc<Schema>, payloads: &[Vec<u8>]) -> (f64, f64) {
    let started = Instant::now();
    let mut wire = Vec::with_capacity(payloads.len());
    for p in payloads {
        let bytes = c
            .write_bytes("orders", Some(schema), Some(p))
            .await
            .expect("writes")
            .expect("a value");
        wire.push(bytes);
    }
    let written = started.elapsed();
    let started = Instant::now();
    for (w, p) in wire.iter().zip(payloads) {
        let (read_schema, read) = c.read(Some(w)).await.expect("reads");
        assert!(read_schema.is_some());
        assert_eq!(
            read.as_deref().map(<[u8]>::len),
            Some(p.len()),
            "round trip"
        );
    }
    let read = started.elapsed();
    let n = payloads.len() as f64;
    (written.as_nanos() as f64 / n, read.as_nanos() as f64 / n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Under callgrind: one case, `n` records written and read, nothing
/// printed.
fn counted(case: &str, n: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let schema = order_schema();
    let payloads: Vec<Vec<u8>> = (0..n).map(order_payload).collect();
    let c = converter(case);
    runtime.block_on(run(&c, &schema, &payloads));
}

/// Instructions per record of `case` (write and read together), or why
/// they were not counted.
fn instructions(case: &str) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut totals = Vec::new();
    for n in [FEW, MANY] {
        let out = std::env::temp_dir().join(format!(
            "sluice-converters-{}-{n}.callgrind",
            std::process::id()
        ));
        let status = Command::new("valgrind")
            .args(["--tool=callgrind", "--quiet"])
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(&exe)
            .env("SLUICE_BENCH_CONVERTER_CASE", case)
            .env("SLUICE_BENCH_CONVERTER_RECORDS", n.to_string())
            .status()
            .map_err(|e| format!("valgrind: {e}"))?;
        if !status.success() {
            return Err(format!("valgrind exited with {status}"));
        }
        let text = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
        let _ = std::fs::remove_file(&out);
        let total = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("totals:")
                    .or_else(|| l.strip_prefix("summary:"))
            })
            .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
            .ok_or("no totals in callgrind's output")?;
        totals.push(total);
    }
    Ok((totals[1] - totals[0]) / (MANY - FEW) as f64)
}

fn main() {
    if let Ok(case) = std::env::var("SLUICE_BENCH_CONVERTER_CASE") {
        let n = std::env::var("SLUICE_BENCH_CONVERTER_RECORDS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(FEW);
        counted(&case, n);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` does not run
    // this at length.
    if !std::env::args().any(|a| a == "--bench") {
        counted("AvroConverter", 10);
        counted("ProtobufConverter", 10);
        counted("JsonSchemaConverter+validation", 10);
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let schema = order_schema();
    let payloads: Vec<Vec<u8>> = (0..RECORDS_PER_ROUND).map(order_payload).collect();
    let mut timed = Vec::new();
    for case in CASES {
        let c = converter(case);
        // Warm: the schema registered and its id cached.
        runtime.block_on(run(&c, &schema, &payloads[..10]));
        let (mut writes, mut reads) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let (w, r) = runtime.block_on(run(&c, &schema, &payloads));
            writes.push(w);
            reads.push(r);
        }
        timed.push((case, median(writes), median(reads)));
    }
    let (base_write, base_read) = (timed[0].1, timed[0].2);
    println!("\nconverters, {RECORDS_PER_ROUND} records x {ROUNDS} rounds (median), ns per record");
    println!("| converter | write ns | ratio | read ns | ratio |");
    println!("|---|---:|---:|---:|---:|");
    for (case, w, r) in &timed {
        println!(
            "| {case} | {w:.0} | {:.2} | {r:.0} | {:.2} |",
            w / base_write,
            r / base_read
        );
    }
    println!("\ninstructions per record (callgrind, write + read, {MANY} minus {FEW} records)");
    println!("| converter | instructions | ratio |");
    println!("|---|---:|---:|");
    let mut base = None;
    for case in CASES {
        match instructions(case) {
            Ok(i) => {
                let b = *base.get_or_insert(i);
                println!("| {case} | {i:.0} | {:.2} |", i / b);
            }
            Err(e) => println!("| {case} | NOT COUNTED: {e} | |"),
        }
    }
}
