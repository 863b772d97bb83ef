//! Bad worker or connector JSON stops `sluice` before anything starts, with
//! an error naming the file, the key and what was expected.

use std::path::{Path, PathBuf};

use crate::fixtures;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn good_worker(dir: &Path) -> PathBuf {
    write(
        dir,
        "worker.json",
        &format!(
            r#"{{"listeners": "http://127.0.0.1:{}"}}"#,
            fixtures::free_port()
        ),
    )
}

#[test]
fn syntax_error_names_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let worker = write(dir.path(), "worker.json", "{\n  \"group.id\": \"a\",,\n}");
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("worker.json: not valid JSON at line 2, column"),
        "{err}"
    );
}

#[test]
fn unknown_worker_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let worker = write(
        dir.path(),
        "worker.json",
        r#"{"bootstrap.server": "localhost:9092"}"#,
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("worker.json: key `bootstrap.server`: not supported"),
        "{err}"
    );
    assert!(
        err.contains("bootstrap.servers"),
        "the supported keys are listed: {err}"
    );
}

#[test]
fn unknown_connector_class_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let worker = good_worker(dir.path());
    let c = write(
        dir.path(),
        "c.json",
        r#"{"name": "x", "config": {"connector.class": "com.example.Nope", "topic": "t"}}"#,
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker, &c]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("c.json: connector `x`: key `connector.class`: `com.example.Nope` is not a known connector class"), "{err}");
    assert!(
        err.contains("datagen") && err.contains("jdbc-sink"),
        "known classes listed: {err}"
    );
}

#[test]
fn missing_required_key_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let worker = good_worker(dir.path());
    let c = write(
        dir.path(),
        "src.json",
        r#"{"name": "gen", "config": {"connector.class": "datagen"}}"#,
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker, &c]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("src.json: connector `gen`: key `topic`: is required but missing"),
        "{err}"
    );

    let c = write(
        dir.path(),
        "missing-class.json",
        r#"{"name": "gen", "config": {"topic": "t"}}"#,
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker, &c]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "missing-class.json: connector `gen`: key `connector.class`: is required but missing"
        ),
        "{err}"
    );
}

#[test]
fn wrong_types_and_unsupported_keys_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let worker = good_worker(dir.path());
    let c = write(
        dir.path(),
        "sink.json",
        r#"{"name": "s", "config": {"connector.class": "FileStreamSink", "topics": "t", "file": "out", "colour": "red"}}"#,
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker, &c]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("sink.json: connector `s`: key `colour`: not supported by this plugin; supported keys are: file"), "{err}");

    let c = write(
        dir.path(),
        "gen.json",
        r#"{"name": "g", "config": {"connector.class": "datagen", "topic": "t", "rate": "fast"}}"#,
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker, &c]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("gen.json: connector `g`: key `rate`: expected a number, got `fast`"),
        "{err}"
    );

    let c = write(
        dir.path(),
        "nested.json",
        r#"{"name": "g", "config": {"connector.class": "datagen", "topic": {"a": 1}}}"#,
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker, &c]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("nested.json: key `config.topic`: expected a string value"),
        "{err}"
    );
}

#[test]
fn a_module_that_does_not_load_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let worker = good_worker(dir.path());
    let not_wasm = write(dir.path(), "fake.wasm", "this is not WebAssembly");
    let c = write(
        dir.path(),
        "gen.json",
        &serde_json::json!({"name": "g", "config": {
            "connector.class": "datagen", "topic": "t", "transforms": "t1",
            "transforms.t1.type": "wasm", "transforms.t1.module": not_wasm.display().to_string()
        }})
        .to_string(),
    );
    let (code, err) = fixtures::sluice_rejects(dir.path(), &[&worker, &c]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("gen.json: connector `g`: key `transforms.t1.module`: loading WASM component"),
        "{err}"
    );
}
