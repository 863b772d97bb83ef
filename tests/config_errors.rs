//! Bad worker or connector JSON stops `sluice` before anything starts, with
//! an error naming the file, the key and what was expected.

use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// `file.allowed.paths` confines `file-source` and `file-sink`: a path
/// outside, or one that leaves through `..` or a symbolic link, is refused
/// with the key named, through the worker's REST API.
#[tokio::test(flavor = "multi_thread")]
async fn file_connectors_stay_in_the_allowed_paths() {
    let dir = tempfile::tempdir().unwrap();
    let allowed = dir.path().join("allowed");
    let outside = dir.path().join("outside");
    std::fs::create_dir(&allowed).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, allowed.join("link")).unwrap();
    let port = fixtures::free_port();
    let worker = write(
        dir.path(),
        "worker.json",
        &serde_json::json!({
            "listeners": format!("http://127.0.0.1:{port}"),
            "file.allowed.paths": allowed.display().to_string(),
        })
        .to_string(),
    );
    let _sluice = fixtures::SluiceProcess::start(dir.path(), &[&worker]);
    let rest = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    fixtures::eventually(Duration::from_secs(60), "the worker's REST API", || async {
        http.get(format!("{rest}/")).send().await.ok().map(|_| ())
    })
    .await;
    let create = |name: &str, class: &str, file: PathBuf| {
        let (http, rest) = (http.clone(), rest.clone());
        let mut config =
            serde_json::json!({"connector.class": class, "file": file.display().to_string()});
        if class == "file-sink" {
            config["topics"] = "t".into();
        } else {
            config["topic"] = "t".into();
        }
        let body = serde_json::json!({"name": name, "config": config});
        async move {
            let r = http
                .post(format!("{rest}/connectors"))
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    for (name, class, file) in [
        ("out", "file-sink", outside.join("out.jsonl")),
        (
            "dots",
            "file-sink",
            allowed.join("..").join("outside").join("out.jsonl"),
        ),
        ("link", "file-sink", allowed.join("link").join("out.jsonl")),
        ("read", "file-source", outside.join("secret.txt")),
        (
            "read-link",
            "file-source",
            allowed.join("link").join("secret.txt"),
        ),
        ("etc", "file-source", PathBuf::from("/etc/passwd")),
    ] {
        let (status, body) = create(name, class, file).await;
        assert_eq!(status, 400, "{name}: {body}");
        assert!(body.contains("file.allowed.paths"), "{name}: {body}");
    }
    let (status, body) = create("inside", "file-sink", allowed.join("out.jsonl")).await;
    assert_eq!(status, 201, "{body}");
    assert!(
        !outside.join("out.jsonl").exists(),
        "nothing was written outside"
    );
}
