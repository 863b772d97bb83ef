//! `sluice transform test`: runs one component over sample records given as
//! JSON lines, and renders each result as a JSON line.
//!
//! An input line is `{"key":..., "value":..., "headers":{...}, "topic":...,
//! "partition":..., "offset":..., "timestamp":...}`, every field optional.
//! `key` and `value` are bytes: a JSON string stands for its text, any
//! other JSON (an object, an array, a number, ...) for its serialisation;
//! `null` or absent is no key / no value (a tombstone). `headers` is an
//! object (`{"k": "v", "n": null}`) or a list of `[key, value]` pairs (to
//! keep duplicates).
//!
//! An output line is `{"input": N, "result": "ok", "records": [...]}` (N
//! counts the sample records from 1, blank lines aside; `records` is empty,
//! and `"result"` is `"dropped"`, when the record was dropped), or
//! `{"input": N, "result": "error", "class": "data"|"retriable"|"fatal",
//! "message": ...}`. Output records have the input's shape, with `headers`
//! as `[key, value]` pairs (values as text, lossy UTF-8); a key or value
//! that is JSON other than a string is shown as that JSON, anything else as
//! its text (lossy UTF-8).

use std::path::Path;

use serde_json::{Value, json};
use sluice_sdk::{ConnectError, Header, Record};

use super::wasm::{Flavor, WasmHost, WasmTransform};
use crate::config::TransformLimits;
use crate::metrics::Metrics;

/// Which world the component must implement (`--world`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorldChoice {
    /// Whichever it exports.
    Auto,
    /// `sluice:transform/transformer` (typed records).
    Transform,
    /// The `bytes` world.
    Bytes,
}

/// A sample run's failure before any record: the exit code says which.
#[derive(Debug)]
pub enum SampleError {
    /// The component cannot be loaded, or does not implement the world.
    Load(String),
    /// The component rejected its config (or trapped in `configure`).
    Configure(String),
    /// An input line is not a sample record.
    Input(String),
}

impl std::fmt::Display for SampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleError::Load(m) | SampleError::Configure(m) | SampleError::Input(m) => {
                f.write_str(m)
            }
        }
    }
}

/// Parses sample records, one JSON object per non-blank line.
pub fn parse_records(text: &str) -> Result<Vec<Record>, SampleError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            parse_record(line).map_err(|e| SampleError::Input(format!("input line {}: {e}", i + 1)))
        })
        .collect()
}

fn bytes_of(v: &Value, what: &str) -> Result<Option<Vec<u8>>, String> {
    Ok(match v {
        Value::Null => None,
        Value::String(s) => Some(s.as_bytes().to_vec()),
        other => Some(
            serde_json::to_vec(other).map_err(|e| format!("`{what}` cannot be serialised: {e}"))?,
        ),
    })
}

fn parse_record(line: &str) -> Result<Record, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    record_from_json(&v)
}

/// One sample record from its JSON object (the shape of an input line).
pub fn record_from_json(v: &Value) -> Result<Record, String> {
    let Value::Object(o) = v else {
        return Err("not a JSON object".into());
    };
    for k in o.keys() {
        if ![
            "topic",
            "partition",
            "offset",
            "timestamp",
            "key",
            "value",
            "headers",
        ]
        .contains(&k.as_str())
        {
            return Err(format!(
                "unknown field `{k}` (known: topic, partition, offset, timestamp, key, value, headers)"
            ));
        }
    }
    let int = |k: &str, default: i64| -> Result<i64, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => v.as_i64().ok_or_else(|| format!("`{k}` is not an integer")),
        }
    };
    let topic = match o.get("topic") {
        None | Some(Value::Null) => "sample".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("`topic` is not a string".into()),
    };
    let timestamp = match o.get("timestamp") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_i64().ok_or("`timestamp` is not an integer")?),
    };
    let header = |k: &str, v: &Value| -> Result<Header, String> {
        Ok(Header {
            key: k.to_string(),
            value: bytes_of(v, "headers")?,
        })
    };
    let headers = match o.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(h)) => h
            .iter()
            .map(|(k, v)| header(k, v))
            .collect::<Result<_, _>>()?,
        Some(Value::Array(pairs)) => pairs
            .iter()
            .map(|p| match p.as_array().map(Vec::as_slice) {
                Some([Value::String(k), v]) => header(k, v),
                _ => Err("`headers` pairs are [\"key\", value]".to_string()),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`headers` is not an object or a list of pairs".into()),
    };
    Ok(Record {
        topic,
        partition: i32::try_from(int("partition", -1)?)
            .map_err(|_| "`partition` is out of range")?,
        offset: int("offset", -1)?,
        timestamp,
        key: bytes_of(o.get("key").unwrap_or(&Value::Null), "key")?,
        value: bytes_of(o.get("value").unwrap_or(&Value::Null), "value")?,
        headers,
        ..Default::default()
    })
}

/// Bytes shown as the JSON they hold (unless it is a string), else as text.
fn show_bytes(b: &Option<Vec<u8>>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => match serde_json::from_slice::<Value>(b) {
            Ok(v) if !v.is_string() => v,
            _ => Value::String(String::from_utf8_lossy(b).into_owned()),
        },
    }
}

/// One record as a JSON object (the input shape, headers as pairs).
pub fn record_json(r: &Record) -> Value {
    json!({
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": show_bytes(&r.key),
        "value": show_bytes(&r.value),
        "headers": r.headers.iter().map(|h| json!([h.key, h.value.as_ref().map(|v| String::from_utf8_lossy(v))])).collect::<Vec<_>>(),
    })
}

/// One input's result as a JSON object.
pub fn outcome_json(input: usize, outcome: &Result<Vec<Record>, ConnectError>) -> Value {
    match outcome {
        Ok(records) => json!({
            "input": input,
            "result": if records.is_empty() { "dropped" } else { "ok" },
            "records": records.iter().map(record_json).collect::<Vec<_>>(),
        }),
        Err(e) => json!({
            "input": input,
            "result": "error",
            "class": e.kind.as_str(),
            "message": e.full_message(),
        }),
    }
}

/// Loads `module` with the default limits, configures it and runs the
/// records through it: in one batch, or one call per record.
pub fn run(
    module: &Path,
    config: Vec<(String, String)>,
    world: WorldChoice,
    records: Vec<Record>,
    per_record: bool,
    cache_dir: Option<std::path::PathBuf>,
) -> Result<Vec<Result<Vec<Record>, ConnectError>>, SampleError> {
    let metrics = Metrics::new();
    let host = WasmHost::new(cache_dir, metrics.wasm_compilations.clone())
        .map_err(|e| SampleError::Load(format!("{e:#}")))?;
    let limits = TransformLimits::default();
    let loaded = host
        .load(module, &limits)
        .map_err(|e| SampleError::Load(format!("{e:#}")))?;
    match (world, loaded.flavor) {
        (WorldChoice::Transform, Flavor::Bytes) => {
            return Err(SampleError::Load(format!(
                "{} implements the `bytes` world, not `transform` (--world)",
                module.display()
            )));
        }
        (WorldChoice::Bytes, Flavor::Records) => {
            return Err(SampleError::Load(format!(
                "{} implements the `transform` world, not `bytes` (--world)",
                module.display()
            )));
        }
        _ => {}
    }
    let mut transform = WasmTransform::new(
        &host,
        loaded,
        "sample",
        config,
        limits,
        metrics.transform("sample", 0, "sample"),
    )
    .map_err(|e| SampleError::Configure(e.full_message()))?;
    Ok(if per_record {
        records.iter().map(|r| transform.transform_one(r)).collect()
    } else if records.is_empty() {
        Vec::new()
    } else {
        transform.transform_batch(records)
    })
}
