//! The SMT differential: Kafka Connect's own single message transforms (and
//! Debezium's `ExtractNewRecordState`), run on Java by the harness in
//! `compat/smt-harness/`, and Sluice's standard transform library
//! (`plugins/transforms`), configured with the same class names and keys,
//! over the same corpus (`compat/smt-corpus/records.json`, every config of
//! `configs.json` on every record). Outcomes are compared field by field:
//! dropped or not, failed or not (failures are not compared by message),
//! topic, partition, timestamp, key, value (as JSON values) and headers (as
//! text, after Kafka Connect's SimpleHeaderConverter).
//!
//! Records with schemas are JsonConverter envelopes on the Kafka Connect
//! side; Sluice's transforms work on schemaless JSON, so they get the
//! envelope's payload, and payloads are compared (docs/compatibility.md,
//! "SMTs", says why).
//!
//! Every difference must be listed in the table of docs/compatibility.md's
//! "SMTs" section, and every listed one must still occur: the test fails on
//! anything else. It needs Java 17+ and Maven, and fails without them.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use sluice_runtime::config::CommonConfig;
use sluice_runtime::metrics::Metrics;
use sluice_runtime::transform::CompiledChain;
use sluice_runtime::transform::wasm::WasmHost;
use sluice_sdk::{ConfigMap, Header, Record};

use crate::fixtures;

/// One record's outcome after one transform, in the harness's shape.
type Outcome = Value;

/// Headers as compared: a text that is a JSON object or array stands for
/// its value, so the member order of a Java `HashMap` does not count.
fn headers(v: &Value) -> Value {
    match v {
        Value::Array(hs) => Value::Array(
            hs.iter()
                .map(|h| match h[1].as_str().map(serde_json::from_str::<Value>) {
                    Some(Ok(j)) if j.is_object() || j.is_array() => json!([h[0], j]),
                    _ => h.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The fields compared, in the order reported.
const FIELDS: [&str; 7] = [
    "outcome",
    "topic",
    "partition",
    "timestamp",
    "key",
    "value",
    "headers",
];

fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn require(tool: &str, args: &[&str], why: &str) {
    let ok = Command::new(tool)
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "\n\n*** The SMT differential cannot run: `{tool}` is missing. {why} \
         (scripts/setup.sh installs it; on Debian: apt-get install openjdk-17-jdk-headless maven). \
         It is never skipped. ***\n"
    );
}

/// Kafka Connect's side: the harness's outcomes by (config, record).
fn kafka_connect(corpus: &Path, out_dir: &Path) -> BTreeMap<(String, String), Outcome> {
    require(
        "java",
        &["-version"],
        "It runs Kafka Connect's SMTs on Java 17 or newer.",
    );
    require(
        "mvn",
        &["-v"],
        "It builds the harness and resolves Kafka Connect.",
    );
    let out = out_dir.join("kafka-connect.jsonl");
    let run = Command::new("bash")
        .arg(fixtures::repo_root().join("compat/smt-harness/run.sh"))
        .arg(corpus.join("records.json"))
        .arg(corpus.join("configs.json"))
        .arg(&out)
        .output()
        .expect("running compat/smt-harness/run.sh");
    assert!(
        run.status.success(),
        "the Kafka Connect SMT harness failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let key = (
                v["config"].as_str().unwrap().to_string(),
                v["record"].as_str().unwrap().to_string(),
            );
            (key, v)
        })
        .collect()
}

/// The payload of a JsonConverter envelope (for records with schemas).
fn payload(v: &Value, schemas: bool) -> Value {
    match v {
        Value::Object(m) if schemas && m.contains_key("schema") => m["payload"].clone(),
        other => other.clone(),
    }
}

/// A corpus record as Sluice's transforms see it.
fn sluice_record(r: &Value) -> Record {
    let schemas = r["schemas"].as_bool().unwrap_or(false);
    let bytes = |v: &Value| match v {
        Value::Null => None,
        v => Some(serde_json::to_vec(&payload(v, schemas)).unwrap()),
    };
    Record {
        topic: r["topic"].as_str().unwrap().to_string(),
        partition: r["partition"].as_i64().unwrap() as i32,
        offset: r["offset"].as_i64().unwrap(),
        timestamp: r["timestamp"].as_i64(),
        key: bytes(&r["key"]),
        value: bytes(&r["value"]),
        headers: r["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| Header {
                key: h[0].as_str().unwrap().to_string(),
                value: h[1].as_str().map(|s| s.as_bytes().to_vec()),
            })
            .collect(),
        ..Default::default()
    }
}

/// A key or value as JSON; the bytes `null` (not a tombstone) are told
/// apart from a null part.
fn part(bytes: &Option<Vec<u8>>) -> Value {
    match bytes {
        None => Value::Null,
        Some(b) => match serde_json::from_slice(b) {
            Ok(Value::Null) => json!("<the JSON bytes `null`, not a null part>"),
            Ok(v) => v,
            Err(_) => json!(format!("<not JSON: {}>", String::from_utf8_lossy(b))),
        },
    }
}

/// The connector config of one entry of configs.json.
fn connector_config(config: &Value) -> ConfigMap {
    let mut keys: ConfigMap = [
        ("name", "compat"),
        ("connector.class", "datagen"),
        ("transforms", "t"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    keys.insert(
        "transforms.t.type".into(),
        config["type"].as_str().unwrap().into(),
    );
    for (k, v) in config["config"].as_object().unwrap() {
        keys.insert(format!("transforms.t.{k}"), v.as_str().unwrap().into());
    }
    if let Some(p) = config.get("predicate") {
        keys.insert("predicates".into(), "p".into());
        keys.insert("transforms.t.predicate".into(), "p".into());
        keys.insert(
            "predicates.p.type".into(),
            p["type"].as_str().unwrap().into(),
        );
        for (k, v) in p["config"].as_object().unwrap() {
            keys.insert(format!("predicates.p.{k}"), v.as_str().unwrap().into());
        }
    }
    if let Some(n) = config.get("negate") {
        keys.insert("transforms.t.negate".into(), n.to_string());
    }
    keys
}

fn error(stage: &str, message: String) -> Outcome {
    json!({"outcome": "error", "stage": stage, "error": message})
}

/// Sluice's side: the standard library over the corpus, by (config, record).
fn sluice(configs: &Value, records: &Value) -> BTreeMap<(String, String), Outcome> {
    let metrics = Metrics::new();
    let host = WasmHost::new(
        Some(fixtures::wasm_cache_dir()),
        metrics.wasm_compilations.clone(),
    )
    .unwrap();
    let mut outcomes = BTreeMap::new();
    for config in configs.as_array().unwrap() {
        let name = config["name"].as_str().unwrap().to_string();
        let chain = CommonConfig::split(&connector_config(config))
            .map_err(|e| e.to_string())
            .and_then(|(mut common, _)| {
                common
                    .resolve_standard_transforms(Some(fixtures::standard_library()))
                    .map_err(|e| e.to_string())?;
                CompiledChain::compile(&host, &common.transforms)
                    .map_err(|(k, m)| format!("{k}: {m}"))?
                    .instantiate(&metrics, "compat", 0)
                    .map_err(|e| e.message)
            });
        let only: Vec<&str> = config["records"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut chain = chain;
        for r in records.as_array().unwrap() {
            let id = r["id"].as_str().unwrap().to_string();
            if !only.is_empty() && !only.contains(&id.as_str()) {
                continue;
            }
            let outcome = match &mut chain {
                Err(e) => error("configure", e.clone()),
                Ok(chain) => match chain.apply(vec![sluice_record(r)]).pop().unwrap() {
                    Err(f) => error("transform", f.error.full_message()),
                    Ok(out) if out.is_empty() => json!({"outcome": "dropped"}),
                    Ok(mut out) => {
                        assert_eq!(out.len(), 1, "{name} on {id}: more than one record");
                        let o = out.pop().unwrap();
                        let headers: Vec<Value> = o
                            .headers
                            .iter()
                            .map(|h| {
                                json!([h.key, h.value.as_deref().map(String::from_utf8_lossy)])
                            })
                            .collect();
                        json!({
                            "outcome": "record",
                            "topic": o.topic,
                            "partition": o.partition,
                            "timestamp": o.timestamp,
                            "key": part(&o.key),
                            "value": part(&o.value),
                            "headers": headers,
                        })
                    }
                },
            };
            outcomes.insert((name.clone(), id), outcome);
        }
    }
    outcomes
}

/// One row of the accepted differences: a config (or, ending in ` *`,
/// every config it starts), the records it covers (`*`: any), and the
/// fields that may differ.
#[derive(Debug)]
struct Accepted {
    config: String,
    /// Each listed record (or `*`), and whether it still differs.
    records: Vec<(String, bool)>,
    fields: Vec<String>,
}

impl Accepted {
    /// `config`, or every config it starts, for a row `prefix *`.
    fn covers(&self, config: &str) -> bool {
        match self.config.strip_suffix(" *") {
            Some(prefix) => config.starts_with(prefix),
            None => self.config == config,
        }
    }
}

/// The table of docs/compatibility.md's "SMTs" section: rows of
/// `` | `config` | `record`, ... or * | field, ... | why | ``.
fn accepted() -> Vec<Accepted> {
    let doc = std::fs::read_to_string(fixtures::repo_root().join("docs/compatibility.md"))
        .expect("docs/compatibility.md lists the accepted differences");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("SMTs"))
        .expect("docs/compatibility.md has a section `## SMTs`");
    let ticked = |cell: &str| -> Vec<String> {
        cell.split(',')
            .map(|s| s.trim().trim_matches('`').to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            assert!(
                cells.len() >= 4,
                "a row of the SMTs table needs 4 cells: {l}"
            );
            Accepted {
                config: cells[0].trim().trim_matches('`').to_string(),
                records: ticked(cells[1]).into_iter().map(|r| (r, false)).collect(),
                fields: ticked(cells[2]),
            }
        })
        .collect()
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 400 {
        format!("{}...", s.chars().take(400).collect::<String>())
    } else {
        s
    }
}

#[test]
fn standard_transforms_match_kafka_connect() {
    let corpus = fixtures::repo_root().join("compat/smt-corpus");
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compat-smt");
    std::fs::create_dir_all(&out_dir).unwrap();
    let records = read_json(&corpus.join("records.json"));
    let configs = read_json(&corpus.join("configs.json"));
    let schemas: BTreeMap<String, bool> = records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_string(),
                r["schemas"].as_bool().unwrap_or(false),
            )
        })
        .collect();

    let reference = kafka_connect(&corpus, &out_dir);
    let ours = sluice(&configs, &records);
    assert_eq!(
        reference.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>(),
        "both sides ran the same configs on the same records"
    );

    let mut accepted = accepted();
    let mut unlisted = Vec::new();
    let mut report = String::new();
    let mut compared = 0;
    for ((config, record), theirs) in &reference {
        let mine = &ours[&(config.clone(), record.clone())];
        compared += 1;
        let with_schema = schemas[record];
        let mut differing = Vec::new();
        for field in FIELDS {
            let (a, b) = match field {
                "key" | "value" => (payload(&theirs[field], with_schema), mine[field].clone()),
                "headers" => (headers(&theirs[field]), headers(&mine[field])),
                _ => (theirs[field].clone(), mine[field].clone()),
            };
            // Two failures match, whatever their messages; when the
            // outcomes differ, the rest says nothing more.
            if field != "outcome"
                && (theirs["outcome"] != mine["outcome"] || theirs["outcome"] == "error")
            {
                continue;
            }
            if a != b {
                differing.push((field, a, b));
            }
        }
        if differing.is_empty() {
            continue;
        }
        let listed = accepted
            .iter_mut()
            .filter(|a| {
                a.covers(config)
                    && differing
                        .iter()
                        .all(|(f, ..)| a.fields.iter().any(|x| x == f))
            })
            .flat_map(|a| a.records.iter_mut())
            .find(|(r, _)| r == "*" || r == record)
            .map(|(_, used)| *used = true)
            .is_some();
        let mut text = format!(
            "{} `{config}` on `{record}`:\n",
            if listed { "accepted" } else { "UNLISTED" }
        );
        if theirs["outcome"] != mine["outcome"] {
            text += &format!(
                "    outcome: Kafka Connect {} / Sluice {}\n      Kafka Connect: {}\n      Sluice:        {}\n",
                theirs["outcome"],
                mine["outcome"],
                short(theirs),
                short(mine)
            );
        }
        for (field, a, b) in differing.iter().filter(|(f, ..)| *f != "outcome") {
            text += &format!(
                "    {field}:\n      Kafka Connect: {}\n      Sluice:        {}\n",
                short(a),
                short(b)
            );
        }
        report += &text;
        if !listed {
            unlisted.push(text);
        }
    }
    std::fs::write(out_dir.join("report.txt"), &report).unwrap();
    let stale: Vec<String> = accepted
        .iter()
        .flat_map(|a| {
            a.records
                .iter()
                .filter(|(_, used)| !used)
                .map(|(r, _)| format!("`{}` on `{r}`", a.config))
        })
        .collect();
    eprintln!(
        "compat_smt: {compared} outcomes compared; report in {}",
        out_dir.join("report.txt").display()
    );
    assert!(
        unlisted.is_empty(),
        "{} difference(s) from Kafka Connect not listed in docs/compatibility.md (SMTs): fix them or list them with the reason they stay\n\n{}",
        unlisted.len(),
        unlisted.join("\n")
    );
    assert!(
        stale.is_empty(),
        "rows of docs/compatibility.md (SMTs) that no longer differ: remove them\n{}",
        stale.join("\n")
    );
}
