//! The converter differential: Kafka Connect 4.1.1's own `JsonConverter`
//! with `schemas.enable=true`, run on Java by `compat/smt-harness/`
//! (`ConverterHarness`), and Sluice's (`sluice_runtime::schema`), over the
//! corpus `compat/converter-corpus/cases.jsonl` (envelopes of every type,
//! logical types, defaults, nesting, nulls, and malformed ones).
//!
//! For each envelope, Kafka Connect reads it into Connect data and writes
//! it back; Sluice reads it into a payload (a sink's form) and writes that
//! back. The bytes must be identical: Kafka Connect's bytes on Java 19 and
//! later, whose doubles and floats are the shortest that read back the
//! same (the harness renders those with Jackson's Schubfach writer, the
//! algorithm of their `Double.toString`); on an older JVM Kafka Connect
//! writes some with more digits, and those numbers (only those) may
//! differ, with the same value. Sluice must also read Kafka Connect's
//! bytes to the same schema and payload as the original, and Kafka Connect
//! must read Sluice's bytes to the same data (a second pass). Malformed
//! envelopes must be refused by both, or (`sluice-refuses`) are ones
//! Kafka Connect reads as something else and Sluice refuses
//! (docs/compatibility.md, "Converters").
//!
//! The second test runs Kafka Connect's `FileStreamSourceTask` over a file
//! and Sluice's `file-source` (on the embedded broker) over the same file,
//! both with `value.converter.schemas.enable=true`: the records' bytes
//! must be identical. Both need Java 17+ and Maven and fail without them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_runtime::config::{DecimalFormat, JsonSchemas};
use sluice_runtime::schema::EnvelopeConverter;
use sluice_runtime::schema::json::{self, Json};

use crate::fixtures::{self, InProcess};

/// What the corpus expects of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Both read it; both write the same bytes.
    Same,
    /// Both refuse it.
    BothRefuse,
    /// Kafka Connect reads it as something else (a string as 0 for an
    /// integer, 300 as 44 for an `int8`); Sluice refuses it.
    SluiceRefuses,
}

struct Case {
    id: String,
    key: bool,
    config: BTreeMap<String, String>,
    bytes: Vec<u8>,
    expect: Expect,
}

/// The corpus: one JSON object a line, its `envelope` kept as written (or
/// `text`, bytes that may not be JSON).
fn corpus() -> Vec<Case> {
    let path = fixtures::repo_root().join("compat/converter-corpus/cases.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let (tree, members) = json::parse_top(line.as_bytes())
                .unwrap_or_else(|e| panic!("a corpus line is not JSON ({e}): {line}"));
            let members = members.unwrap();
            let text_of = |name: &str| members.iter().find(|(k, ..)| k == name);
            let bytes = match (text_of("envelope"), tree.get("text")) {
                (Some((_, _, raw)), _) => raw.to_vec(),
                (None, Some(Json::String(s))) => s.as_bytes().to_vec(),
                _ => panic!("a case has an `envelope` or a `text`: {line}"),
            };
            let string = |name: &str| match tree.get(name) {
                Some(Json::String(s)) => Some(s.clone()),
                _ => None,
            };
            let config = match tree.get("config") {
                Some(Json::Object(m)) => m
                    .iter()
                    .map(|(k, v)| match v {
                        Json::String(s) => (k.clone(), s.clone()),
                        _ => panic!("config values are strings: {line}"),
                    })
                    .collect(),
                _ => BTreeMap::new(),
            };
            Case {
                id: string("id").expect("an id"),
                key: tree.get("key") == Some(&Json::Bool(true)),
                config,
                bytes,
                expect: match string("expect").as_deref() {
                    None => Expect::Same,
                    Some("both-refuse") => Expect::BothRefuse,
                    Some("sluice-refuses") => Expect::SluiceRefuses,
                    Some(other) => panic!("unknown expectation {other}"),
                },
            }
        })
        .collect()
}

fn require_java() {
    for (tool, args) in [("java", &["-version"][..]), ("mvn", &["-v"][..])] {
        let ok = Command::new(tool)
            .args(args)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        assert!(
            ok,
            "\n\n*** The converter differential cannot run: `{tool}` is missing. It runs Kafka \
             Connect's JsonConverter on Java 17 or newer, built with Maven (scripts/setup.sh \
             installs them; on Debian: apt-get install openjdk-17-jdk-headless maven). It is \
             never skipped. ***\n"
        );
    }
}

/// Runs the harness in `mode` over `input`; its output lines.
fn harness(mode: &str, input: &Path, out: &Path) -> Vec<Value> {
    require_java();
    let run = Command::new("bash")
        .arg(fixtures::repo_root().join("compat/smt-harness/run.sh"))
        .args(["converter", mode])
        .arg(input)
        .arg(out)
        .output()
        .expect("running compat/smt-harness/run.sh");
    assert!(
        run.status.success(),
        "the converter harness failed:\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::read_to_string(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The harness's input: each case's bytes as text.
fn harness_cases(cases: &[(&Case, Vec<u8>)]) -> Value {
    Value::Array(
        cases
            .iter()
            .map(|(c, bytes)| {
                json!({
                    "id": c.id, "key": c.key, "config": c.config,
                    "bytes": String::from_utf8(bytes.clone()).unwrap(),
                })
            })
            .collect(),
    )
}

fn converter(config: &BTreeMap<String, String>) -> EnvelopeConverter {
    EnvelopeConverter::new(JsonSchemas {
        decimal_format: match config.get("decimal.format").map(String::as_str) {
            Some("NUMERIC") => DecimalFormat::Numeric,
            _ => DecimalFormat::Base64,
        },
        replace_null_with_default: config
            .get("replace.null.with.default")
            .is_none_or(|v| v == "true"),
        cache_size: 1000,
    })
}

/// Sluice reads an envelope and writes it back.
fn sluice_round_trip(c: &Case, bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let conv = converter(&c.config);
    let (schema, payload) = conv.read(Some(bytes)).map_err(|e| e.full_message())?;
    conv.write_bytes(schema.as_ref(), payload.as_deref())
        .map_err(|e| e.full_message())
}

/// What Sluice reads: the schema (as written back) and the payload.
fn sluice_reads(c: &Case, bytes: &[u8]) -> (Option<String>, Option<String>) {
    let conv = converter(&c.config);
    let (schema, payload) = conv.read(Some(bytes)).unwrap();
    let schema = schema.map(|s| {
        let mut out = Vec::new();
        sluice_runtime::schema::connect::write_schema(&mut out, &s);
        String::from_utf8(out).unwrap()
    });
    (schema, payload.map(|p| String::from_utf8(p).unwrap()))
}

/// Whether two JSON texts are the same but for the digits of numbers.
fn same_but_numbers(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let number = |s: &[u8], mut i: usize| {
        while i < s.len() && matches!(s[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
            i += 1;
        }
        i
    };
    let (mut i, mut j, mut in_string, mut escaped) = (0, 0, false, false);
    while i < a.len() && j < b.len() {
        if !in_string && matches!(a[i], b'-' | b'0'..=b'9') && matches!(b[j], b'-' | b'0'..=b'9') {
            (i, j) = (number(a, i), number(b, j));
            continue;
        }
        if a[i] != b[j] {
            return false;
        }
        if in_string && !escaped && a[i] == b'"' {
            in_string = false;
        } else if !in_string && a[i] == b'"' {
            in_string = true;
        }
        escaped = in_string && !escaped && a[i] == b'\\';
        i += 1;
        j += 1;
    }
    i == a.len() && j == b.len()
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

#[test]
fn json_converter_envelopes_match_kafka_connect() {
    let cases = corpus();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("compat-converter");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("cases.json");
    let first: Vec<(&Case, Vec<u8>)> = cases.iter().map(|c| (c, c.bytes.clone())).collect();
    std::fs::write(&input, harness_cases(&first).to_string()).unwrap();
    let reference: BTreeMap<String, Value> = harness("convert", &input, &dir.join("kc.jsonl"))
        .into_iter()
        .map(|v| (v["id"].as_str().unwrap().to_string(), v))
        .collect();
    assert_eq!(reference.len(), cases.len(), "one outcome per case");

    let mut problems = Vec::new();
    let mut older_jvm_digits = Vec::new();
    let mut written_by_sluice = Vec::new();
    for c in &cases {
        let theirs = &reference[&c.id];
        let connect_ok = theirs["outcome"] == "ok";
        let ours = sluice_round_trip(c, &c.bytes);
        match (c.expect, &ours, connect_ok) {
            (Expect::BothRefuse, Err(_), false) | (Expect::SluiceRefuses, Err(_), true) => {}
            (Expect::Same, Ok(bytes), true) => {
                let ours = bytes
                    .as_ref()
                    .map(|b| String::from_utf8(b.clone()).unwrap());
                if ours != text(&theirs["shortest"]) {
                    problems.push(format!(
                        "{}: bytes differ\n  Kafka Connect: {}\n  Sluice:        {}",
                        c.id,
                        theirs["shortest"],
                        ours.as_deref().unwrap_or("null")
                    ));
                    continue;
                }
                if theirs["bytes"] != theirs["shortest"] {
                    // This JVM's Double.toString: the same numbers (as the
                    // schema's types), written longer.
                    let longer = text(&theirs["bytes"]).unwrap();
                    let shortest = text(&theirs["shortest"]).unwrap();
                    assert!(
                        same_but_numbers(&longer, &shortest),
                        "{}: only numbers may differ:\n{longer}\n{shortest}",
                        c.id
                    );
                    assert_eq!(
                        sluice_reads(c, longer.as_bytes()),
                        sluice_reads(c, shortest.as_bytes()),
                        "{}: only the digits of doubles and floats may differ",
                        c.id
                    );
                    older_jvm_digits.push(c.id.clone());
                }
                // Sluice reads Kafka Connect's bytes as it read the original.
                if let Some(connect_bytes) = text(&theirs["bytes"]) {
                    let read_theirs = sluice_reads(c, connect_bytes.as_bytes());
                    let read_original = sluice_reads(c, &c.bytes);
                    if read_theirs != read_original {
                        problems.push(format!(
                            "{}: Sluice reads Kafka Connect's bytes as {read_theirs:?}, the original as {read_original:?}",
                            c.id
                        ));
                    }
                }
                if let Some(bytes) = bytes {
                    written_by_sluice.push((c, bytes.clone()));
                }
            }
            _ => problems.push(format!(
                "{} (expected {:?}): Kafka Connect {}, Sluice {}",
                c.id,
                c.expect,
                if connect_ok {
                    format!("wrote {}", theirs["bytes"])
                } else {
                    format!("refused: {}", theirs["error"])
                },
                match &ours {
                    Ok(b) => format!(
                        "wrote {}",
                        b.as_deref()
                            .map(String::from_utf8_lossy)
                            .unwrap_or_default()
                    ),
                    Err(e) => format!("refused: {e}"),
                }
            )),
        }
    }
    assert!(
        problems.is_empty(),
        "{} difference(s) from Kafka Connect's JsonConverter:\n\n{}",
        problems.len(),
        problems.join("\n\n")
    );

    // Kafka Connect reads what Sluice wrote as the same data: it writes
    // exactly what it wrote from the original.
    let second_input = dir.join("sluice-written.json");
    std::fs::write(&second_input, harness_cases(&written_by_sluice).to_string()).unwrap();
    let again = harness("convert", &second_input, &dir.join("kc-again.jsonl"));
    assert_eq!(again.len(), written_by_sluice.len());
    for v in &again {
        let id = v["id"].as_str().unwrap();
        assert_eq!(
            v["outcome"], "ok",
            "{id}: Kafka Connect refused Sluice's bytes: {v}"
        );
        assert_eq!(
            v["bytes"], reference[id]["bytes"],
            "{id}: Kafka Connect reads Sluice's bytes as other data"
        );
    }
    let same = cases.iter().filter(|c| c.expect == Expect::Same).count();
    eprintln!(
        "compat_converter: {} cases ({same} written byte for byte by both, {} refused by both, {} refused by Sluice only); \
         this JVM wrote longer digits for doubles in {older_jvm_digits:?}",
        cases.len(),
        cases
            .iter()
            .filter(|c| c.expect == Expect::BothRefuse)
            .count(),
        cases
            .iter()
            .filter(|c| c.expect == Expect::SluiceRefuses)
            .count(),
    );
    assert!(same >= 30, "the corpus covers the types");
}

/// Lines FileStreamSource and `file-source` read alike (no empty lines,
/// lines end in `\n`).
const LINES: [&str; 6] = [
    "plain text",
    r#"{"order_id": 1, "status": "paid"}"#,
    "quotes \" and \\ backslashes",
    "tab\there, control \u{1} and del \u{7f}",
    "unicode: é 日本 😀 \u{2028}",
    "   spaces kept   ",
];

#[tokio::test(flavor = "multi_thread")]
async fn file_source_writes_what_file_stream_source_writes() {
    let dir = tempfile::tempdir().unwrap();
    let file: PathBuf = dir.path().join("lines.txt");
    let mut content = LINES.join("\n");
    content.push('\n');
    std::fs::write(&file, content).unwrap();
    let reference = harness(
        "file-source",
        &file,
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("compat-file-source.jsonl"),
    );
    assert_eq!(
        reference.len(),
        LINES.len(),
        "FileStreamSource read every line"
    );

    let env = InProcess::start();
    env.broker.create_topic("lines", 1).await.unwrap();
    env.create(json!({"name": "lines-source", "config": {
        "connector.class": "FileStreamSource", "file": file.display().to_string(), "topic": "lines",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }}))
    .await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let records = fixtures::eventually(Duration::from_secs(60), "every line in Kafka", || {
        let bootstrap = bootstrap.clone();
        async move {
            let r = tokio::task::spawn_blocking(move || fixtures::read_topic(&bootstrap, "lines"))
                .await
                .ok()?;
            (r.len() >= LINES.len()).then_some(r)
        }
    })
    .await;
    use rdkafka::Message;
    let ours: Vec<Value> = records
        .iter()
        .map(|m| {
            json!({
                "key": m.key().map(|k| String::from_utf8(k.to_vec()).unwrap()),
                "value": m.payload().map(|v| String::from_utf8(v.to_vec()).unwrap()),
            })
        })
        .collect();
    assert_eq!(
        ours, reference,
        "the records Kafka holds, Sluice's and FileStreamSource's"
    );
    assert_eq!(
        reference[0]["value"],
        r#"{"schema":{"type":"string","optional":false},"payload":"plain text"}"#
    );
}
