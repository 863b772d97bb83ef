//! Parsing a record's JSON into column values as it gets wider: the cost
//! per field at 1,000, 10,000 and 100,000 fields, as a ratio to the cost
//! per field at 1,000 measured in the same run (1.0 when parsing is
//! linear in the fields).
//!
//!     cargo bench --locked -p sluice-connector-jdbc --bench wide_records

use std::time::Instant;

use sluice_connector_jdbc::value::ParsedValue;

fn record(fields: usize) -> Vec<u8> {
    let mut json = String::from("{");
    for i in 0..fields {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!("\"field_{i}\": {i}"));
    }
    json.push('}');
    json.into_bytes()
}

/// Nanoseconds per field, the best of a few rounds.
fn per_field(fields: usize) -> f64 {
    let bytes = record(fields);
    let rounds = (200_000 / fields).clamp(1, 200);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        for _ in 0..rounds {
            let parsed = ParsedValue::parse(std::hint::black_box(&bytes)).unwrap();
            std::hint::black_box(parsed);
        }
        let ns = started.elapsed().as_nanos() as f64 / (rounds * fields) as f64;
        best = best.min(ns);
    }
    best
}

fn main() {
    let base = per_field(1_000);
    println!("| fields | bytes | ns per field | vs 1,000 fields |");
    println!("|---:|---:|---:|---:|");
    for fields in [1_000, 10_000, 100_000] {
        let ns = if fields == 1_000 {
            base
        } else {
            per_field(fields)
        };
        println!(
            "| {fields} | {} | {ns:.1} | {:.2} |",
            record(fields).len(),
            ns / base
        );
    }
}
