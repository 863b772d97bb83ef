//! One conformance suite for the reference transform in every language
//! (`examples/transforms/<language>/`): each component is built from source
//! by its `build.sh` (cached by a hash of its sources), loaded by the real
//! host with its default limits, and run over the same table of records,
//! one record per call and in one batch. Then `sluice transform test`, the
//! command that runs a component over sample records.
//!
//! A language whose toolchain is missing fails, naming what to install
//! (`scripts/wasm-toolchains.sh` installs them all).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use sluice_runtime::config::TransformLimits;
use sluice_runtime::metrics::Metrics;
use sluice_runtime::transform::wasm::{WasmHost, WasmTransform};
use sluice_sdk::{ErrorKind, Header, Record};

use crate::fixtures;
use crate::fixtures::{LANGUAGES, build_language, tools_path};

/// What the reference transform must make of one record.
enum Expect {
    /// One record: the input with this JSON value (compared parsed).
    Value(Value),
    /// The input record, byte for byte (a tombstone).
    Unchanged,
    Dropped,
    /// A `data` error.
    DataError,
}

struct Case {
    name: &'static str,
    value: Option<Vec<u8>>,
    expect: Expect,
}

fn case(name: &'static str, value: &[u8], expect: Expect) -> Case {
    Case {
        name,
        value: Some(value.to_vec()),
        expect,
    }
}

/// Everything but the value is the same in every input, and must come out
/// unchanged: topic, partition, offset, timestamp, a key, and headers with
/// a null value, a duplicate key and non-UTF-8 bytes, in this order.
fn record(value: Option<Vec<u8>>) -> Record {
    Record {
        topic: "orders".into(),
        partition: 3,
        offset: 42,
        timestamp: Some(1_767_225_600_000),
        key: Some(b"order-17".to_vec()),
        value,
        headers: vec![
            Header {
                key: "trace".into(),
                value: Some(b"abc".to_vec()),
            },
            Header {
                key: "empty".into(),
                value: None,
            },
            Header {
                key: "trace".into(),
                value: Some(b"second".to_vec()),
            },
            Header {
                key: "bin".into(),
                value: Some(vec![0, 0xff, 1, 0x80]),
            },
        ],
        ..Default::default()
    }
}

/// With the default config: uppercase `status`, add `processed_by=sluice`,
/// drop on `drop: true`.
fn default_cases() -> Vec<Case> {
    vec![
        case(
            "map",
            br#"{"id":1,"status":"shipped","amount":12.5,"nested":{"a":[1,2,{"b":null}]},"flag":false}"#,
            Expect::Value(json!({"id":1,"status":"SHIPPED","amount":12.5,
                "nested":{"a":[1,2,{"b":null}]},"flag":false,"processed_by":"sluice"})),
        ),
        case(
            "status that is not a string is left alone",
            br#"{"status":7}"#,
            Expect::Value(json!({"status":7,"processed_by":"sluice"})),
        ),
        case(
            "empty object",
            b"{}",
            Expect::Value(json!({"processed_by":"sluice"})),
        ),
        case(
            "the added field replaces one of that name",
            br#"{"processed_by":"someone","status":"a"}"#,
            Expect::Value(json!({"processed_by":"sluice","status":"A"})),
        ),
        case(
            "whitespace around and inside",
            b" \n{ \"status\" : \"a\" ,\t\"n\" : [ ] } \r\n",
            Expect::Value(json!({"status":"A","n":[],"processed_by":"sluice"})),
        ),
        case(
            "unicode and escapes",
            "{\"status\":\"café ✓ ñ\",\"name\":\"Zoë 名前 🎉\",\"esc\":\"line\\nbreak \\\"q\\\" \\\\ \\u0001 \\ud83c\\udf89 \\/\"}".as_bytes(),
            Expect::Value(json!({"status":"CAFÉ ✓ Ñ","name":"Zoë 名前 🎉",
                "esc":"line\nbreak \"q\" \\ \u{1} 🎉 /","processed_by":"sluice"})),
        ),
        case("drop", br#"{"drop":true,"status":"x"}"#, Expect::Dropped),
        case(
            "drop only on true",
            br#"{"drop":"true","status":"x"}"#,
            Expect::Value(json!({"drop":"true","status":"X","processed_by":"sluice"})),
        ),
        case(
            "drop false keeps",
            br#"{"drop":false}"#,
            Expect::Value(json!({"drop":false,"processed_by":"sluice"})),
        ),
        case("not JSON", b"not json", Expect::DataError),
        case("empty value", b"", Expect::DataError),
        case("trailing data", b"{} x", Expect::DataError),
        case("truncated", br#"{"status":"a""#, Expect::DataError),
        case(
            "invalid UTF-8",
            b"{\"status\":\"\xff\"}",
            Expect::DataError,
        ),
        case("JSON array", b"[1,2]", Expect::DataError),
        case("JSON string", br#""status""#, Expect::DataError),
        case("JSON number", b"42", Expect::DataError),
        Case {
            name: "tombstone",
            value: None,
            expect: Expect::Unchanged,
        },
    ]
}

const CUSTOM: [(&str, &str); 4] = [
    ("uppercase.field", "name"),
    ("add.field", "x"),
    ("add.value", "from-the-test"),
    ("drop.field", "gone"),
];

fn custom_cases() -> Vec<Case> {
    vec![
        case(
            "custom fields",
            br#"{"name":"ada","status":"ok","drop":true}"#,
            Expect::Value(json!({"name":"ADA","status":"ok","drop":true,"x":"from-the-test"})),
        ),
        case("custom drop field", br#"{"gone":true}"#, Expect::Dropped),
        Case {
            name: "custom tombstone",
            value: None,
            expect: Expect::Unchanged,
        },
    ]
}

fn host() -> (WasmHost, Metrics) {
    let metrics = Metrics::new();
    let host = WasmHost::new(
        Some(fixtures::wasm_cache_dir()),
        metrics.wasm_compilations.clone(),
    )
    .expect("the host starts");
    (host, metrics)
}

fn instance(
    host: &WasmHost,
    metrics: &Metrics,
    module: &Path,
    config: &[(&str, &str)],
) -> Result<WasmTransform, sluice_sdk::ConnectError> {
    let limits = TransformLimits::default();
    let loaded = host
        .load(module, &limits)
        .unwrap_or_else(|e| panic!("loading {}: {e:#}", module.display()));
    WasmTransform::new(
        host,
        loaded,
        "conformance",
        config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        limits,
        metrics.transform("conformance", 0, "conformance"),
    )
}

/// Checks one result against its case; returns what is wrong, if anything.
fn check(
    case: &Case,
    input: &Record,
    got: &Result<Vec<Record>, sluice_sdk::ConnectError>,
) -> Option<String> {
    let out = match (&case.expect, got) {
        (Expect::DataError, Err(e)) if e.kind == ErrorKind::Data => return None,
        (Expect::DataError, other) => return Some(format!("expected a data error, got {other:?}")),
        (_, Err(e)) => return Some(format!("failed: {} ({:?})", e.full_message(), e.kind)),
        (Expect::Dropped, Ok(out)) if out.is_empty() => return None,
        (Expect::Dropped, Ok(out)) => return Some(format!("expected a drop, got {out:?}")),
        (_, Ok(out)) if out.len() != 1 => {
            return Some(format!("expected one record, got {}: {out:?}", out.len()));
        }
        (_, Ok(out)) => &out[0],
    };
    let same_except_value = out.topic == input.topic
        && out.partition == input.partition
        && out.offset == input.offset
        && out.timestamp == input.timestamp
        && out.key == input.key
        && out.headers == input.headers;
    if !same_except_value {
        return Some(format!(
            "topic, partition, offset, timestamp, key or headers changed: {out:?}"
        ));
    }
    match &case.expect {
        Expect::Unchanged if out.value == input.value => None,
        Expect::Unchanged => Some(format!("value changed: {:?}", out.value)),
        Expect::Value(want) => {
            let bytes = out.value.as_deref().unwrap_or_default();
            match serde_json::from_slice::<Value>(bytes) {
                Ok(v) if &v == want => None,
                Ok(v) => Some(format!("value {v}, expected {want}")),
                Err(e) => Some(format!(
                    "value is not valid JSON ({e}): {}",
                    String::from_utf8_lossy(bytes)
                )),
            }
        }
        Expect::Dropped | Expect::DataError => unreachable!("handled above"),
    }
}

/// The whole table through one language's component, per record and
/// batched; every mismatch is reported at once.
fn conformance(language: &str) {
    let module = build_language(language);
    let (host, metrics) = host();
    let mut failures = Vec::new();
    for (config, cases) in [(&[][..], default_cases()), (&CUSTOM[..], custom_cases())] {
        let inputs: Vec<Record> = cases.iter().map(|c| record(c.value.clone())).collect();
        let mut per_record = instance(&host, &metrics, &module, config)
            .unwrap_or_else(|e| panic!("{language}: configure {config:?}: {}", e.full_message()));
        for (case, input) in cases.iter().zip(&inputs) {
            if let Some(wrong) = check(case, input, &per_record.transform_one(input)) {
                failures.push(format!("[per record] {}: {wrong}", case.name));
            }
        }
        let mut batched = instance(&host, &metrics, &module, config).expect("configures");
        let results = batched.transform_batch(inputs.clone());
        assert_eq!(
            results.len(),
            cases.len(),
            "{language}: one result per input"
        );
        for ((case, input), got) in cases.iter().zip(&inputs).zip(&results) {
            if let Some(wrong) = check(case, input, got) {
                failures.push(format!("[batched] {}: {wrong}", case.name));
            }
        }
        // A second batch on the same instance: state left by the first
        // (the guest's buffers, its allocator) must not leak into it.
        let again = batched.transform_batch(inputs.clone());
        for ((case, input), got) in cases.iter().zip(&inputs).zip(&again) {
            if let Some(wrong) = check(case, input, got) {
                failures.push(format!("[second batch] {}: {wrong}", case.name));
            }
        }
    }
    // An unknown config key is refused when the transform is configured.
    match instance(&host, &metrics, &module, &[("uppercase.feild", "x")]) {
        Ok(_) => failures.push("an unknown config key was accepted".into()),
        Err(e) if e.full_message().contains("uppercase.feild") => {}
        Err(e) => failures.push(format!(
            "the error for an unknown config key does not name it: {}",
            e.full_message()
        )),
    }
    assert!(
        failures.is_empty(),
        "the {language} transform ({}) does not conform:\n  {}",
        module.display(),
        failures.join("\n  ")
    );
}

#[test]
fn rust_conforms() {
    conformance("rust");
}

#[test]
fn c_conforms() {
    conformance("c");
}

#[test]
fn python_conforms() {
    conformance("python");
}

#[test]
fn javascript_conforms() {
    conformance("javascript");
}

#[test]
fn assemblyscript_conforms() {
    conformance("assemblyscript");
}

#[test]
fn zig_conforms() {
    conformance("zig");
}

#[test]
fn go_conforms() {
    conformance("go");
}

#[test]
fn every_language_is_tested() {
    let dir = fixtures::repo_root().join("examples/transforms");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut listed: Vec<String> = LANGUAGES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        found, listed,
        "every example in examples/transforms/ is in the conformance suite"
    );
    for language in LANGUAGES {
        for file in ["README.md", "build.sh"] {
            assert!(
                dir.join(language).join(file).exists(),
                "examples/transforms/{language}/{file} is missing"
            );
        }
    }
}

/// The C bindings are generated by wit-bindgen and committed; when
/// wit-bindgen is on PATH they must match a fresh generation.
#[test]
fn c_bindings_match_the_wit() {
    let root = fixtures::repo_root();
    let committed = root.join("examples/transforms/c/bindings");
    let found = std::env::split_paths(&tools_path()).any(|d| d.join("wit-bindgen").is_file());
    if !found {
        // Straight to the process's stderr, past the test harness's output
        // capture, so that it shows even though the test passes.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\n!!! NOT CHECKED: wit-bindgen is not on PATH, so the committed C bindings in \
             {} were not compared with a fresh generation. Install it with \
             `cargo install wit-bindgen-cli --version 0.57.1` to check them.\n",
            committed.display()
        );
        return;
    }
    let fresh = tempfile::tempdir().unwrap();
    let output = Command::new("wit-bindgen")
        .env("PATH", tools_path())
        .args(["c", "--world", "transform", "--out-dir"])
        .arg(fresh.path())
        .arg(root.join("sdk/wit"))
        .output()
        .expect("running wit-bindgen");
    assert!(
        output.status.success(),
        "wit-bindgen failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in ["transform.c", "transform.h", "transform_component_type.o"] {
        let want = std::fs::read(fresh.path().join(file)).unwrap();
        let have = std::fs::read(committed.join(file)).unwrap();
        assert!(
            want == have,
            "examples/transforms/c/bindings/{file} differs from what wit-bindgen generates from \
             sdk/wit: regenerate with `wit-bindgen c sdk/wit --world transform --out-dir \
             examples/transforms/c/bindings`"
        );
    }
}

fn sluice(args: &[&str], input: &Path) -> (i32, Vec<Value>, String) {
    let cache = fixtures::wasm_cache_dir();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["transform", "test"])
        .args(args)
        .arg("--input")
        .arg(input)
        .arg("--cache-dir")
        .arg(&cache)
        .output()
        .expect("running sluice");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (
        output.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn samples(dir: &Path) -> PathBuf {
    let path = dir.join("records.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"key":"k1","value":{"status":"new","n":1},"headers":{"h":"v","gone":null},"topic":"orders","partition":2,"offset":9,"timestamp":5}"#,
            "\n",
            r#"{"value":{"drop":true}}"#,
            "\n\n",
            r#"{"value":"not json"}"#,
            "\n",
            r#"{"key":"tomb"}"#,
            "\n",
            r#"{"value":"{\"name\":\"ada\"}","headers":[["d","1"],["d","2"]]}"#,
            "\n",
        ),
    )
    .unwrap();
    path
}

/// `sluice transform test` over sample records, with both worlds (the
/// Rust component and the Zig one), batched and per record.
#[test]
fn transform_test_command_runs_a_component_over_samples() {
    let dir = tempfile::tempdir().unwrap();
    let input = samples(dir.path());
    for language in ["rust", "zig"] {
        let module = build_language(language);
        let module = module.to_str().unwrap();
        for mode in [&[][..], &["--per-record"][..]] {
            let mut args = vec![module];
            args.extend_from_slice(mode);
            let (code, lines, stderr) = sluice(&args, &input);
            assert_eq!(code, 0, "{language} {mode:?}: {stderr}");
            assert_eq!(lines.len(), 5, "{language}: one line per record: {lines:?}");
            assert_eq!(
                lines[0],
                json!({"input":1,"result":"ok","records":[{"topic":"orders","partition":2,
                    "offset":9,"timestamp":5,"key":"k1",
                    "value":{"status":"NEW","n":1,"processed_by":"sluice"},
                    "headers":[["h","v"],["gone",null]]}]}),
                "{language} {mode:?}"
            );
            assert_eq!(lines[1], json!({"input":2,"result":"dropped","records":[]}));
            assert_eq!(lines[2]["result"], "error", "{language}: {}", lines[2]);
            assert_eq!(lines[2]["class"], "data");
            assert!(lines[2]["message"].as_str().unwrap().contains("not JSON"));
            assert_eq!(
                lines[3]["records"][0]["value"],
                Value::Null,
                "a tombstone passes"
            );
            assert_eq!(lines[3]["records"][0]["key"], "tomb");
            assert_eq!(lines[3]["records"][0]["topic"], "sample");
            assert_eq!(
                lines[4]["records"][0]["headers"],
                json!([["d", "1"], ["d", "2"]])
            );
            assert_eq!(
                lines[4]["records"][0]["value"],
                json!({"name":"ada","processed_by":"sluice"})
            );
        }
    }
    // Config, and the world check.
    let rust = build_language("rust");
    let rust = rust.to_str().unwrap();
    let (code, lines, _) = sluice(
        &[
            rust,
            "--config",
            "uppercase.field=name",
            "--config",
            "add.field=by",
            "--world",
            "bytes",
        ],
        &input,
    );
    assert_eq!(code, 0);
    assert_eq!(
        lines[4]["records"][0]["value"],
        json!({"name":"ADA","by":"sluice"})
    );
    // The Rust SDK exports the `bytes` world (one buffer each way).
    let (code, lines, stderr) = sluice(&[rust, "--world", "transform"], &input);
    assert_ne!(code, 0, "a component of the other world is refused");
    assert!(lines.is_empty());
    assert!(stderr.contains("not `transform`"), "{stderr}");
    // A rejected config: non-zero, with the transform's reason.
    let (code, _, stderr) = sluice(&[rust, "--config", "bogus=1"], &input);
    assert_ne!(code, 0);
    assert!(stderr.contains("bogus"), "{stderr}");
}

#[test]
fn transform_test_command_fails_on_a_load_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = samples(dir.path());
    let missing = dir.path().join("missing.wasm");
    let (code, lines, stderr) = sluice(&[missing.to_str().unwrap()], &input);
    assert_ne!(code, 0);
    assert!(lines.is_empty());
    assert!(
        stderr.contains("loading the component") && stderr.contains("missing.wasm"),
        "{stderr}"
    );
    let garbage = dir.path().join("garbage.wasm");
    std::fs::write(&garbage, b"\0asm not really").unwrap();
    let (code, _, stderr) = sluice(&[garbage.to_str().unwrap()], &input);
    assert_ne!(code, 0);
    assert!(stderr.contains("garbage.wasm"), "{stderr}");
    // A sample line that is not a record.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"value\":1}\n[1]\n").unwrap();
    let (code, _, stderr) = sluice(&[missing.to_str().unwrap()], &bad);
    assert_ne!(code, 0);
    assert!(stderr.contains("input line 2"), "{stderr}");
}

/// Every language's component in one real pipeline: a datagen source whose
/// records go through a chain of all seven transforms (each adding its own
/// field) to Kafka.
#[tokio::test(flavor = "multi_thread")]
async fn every_language_in_one_connector_chain() {
    const COUNT: usize = 40;
    let modules: Vec<(&str, PathBuf)> = LANGUAGES.iter().map(|l| (*l, build_language(l))).collect();
    let env = fixtures::InProcess::start();
    let mut config = json!({
        "connector.class": "datagen", "topic": "polyglot", "rate": "1000",
        "count": COUNT.to_string(), "batch.size": "10",
        "transforms": LANGUAGES.join(","),
    });
    for (language, module) in &modules {
        let c = config.as_object_mut().unwrap();
        c.insert(format!("transforms.{language}.type"), json!("wasm"));
        c.insert(
            format!("transforms.{language}.module"),
            json!(module.display().to_string()),
        );
        c.insert(
            format!("transforms.{language}.add.field"),
            json!(format!("by_{language}")),
        );
        c.insert(format!("transforms.{language}.add.value"), json!(language));
    }
    env.create(json!({"name": "polyglot", "config": config}))
        .await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let records = fixtures::eventually(
        std::time::Duration::from_secs(180),
        "every generated record through the chain",
        || {
            let bootstrap = bootstrap.clone();
            async move {
                let records = tokio::task::spawn_blocking(move || {
                    fixtures::read_topic(&bootstrap, "polyglot")
                })
                .await
                .ok()?;
                (records.len() >= COUNT).then_some(records)
            }
        },
    )
    .await;
    assert_eq!(records.len(), COUNT);
    for m in &records {
        use rdkafka::Message;
        let value: Value = serde_json::from_slice(m.payload().expect("a value")).unwrap();
        for language in LANGUAGES {
            assert_eq!(
                value[format!("by_{language}")],
                json!(language),
                "the {language} transform ran on {value}"
            );
        }
        let status = value["status"].as_str().expect("datagen sets a status");
        assert_eq!(status, status.to_uppercase(), "{value}");
    }
}
