//! Native connector plugins from `plugin.path`: built here from source,
//! loaded through the C ABI, driven over REST.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::fixtures::{self, InProcess};

/// A plugin directory: the example HTTP sink, the panicking test sink, a
/// library of another ABI version, and a file that is not a library.
fn plugin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let http = fixtures::build_native("plugins/http-sink");
        let tests = fixtures::build_native("tests/native");
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("plugin-path");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (from, name) in [
            (
                http.join("libsluice_http_sink.so"),
                "libsluice_http_sink.so",
            ),
            (
                tests.join("libsluice_test_panicky.so"),
                "libsluice_test_panicky.so",
            ),
            (
                tests.join("libsluice_test_wrong_abi.so"),
                "libsluice_test_wrong_abi.so",
            ),
        ] {
            std::fs::copy(&from, dir.join(name))
                .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        }
        std::fs::write(dir.join("not-a-library.so"), "just text").unwrap();
        dir
    })
    .clone()
}

async fn serve(env: &InProcess) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

#[tokio::test(flavor = "multi_thread")]
async fn the_http_sink_plugin_delivers_with_idempotency_keys() {
    // The receiving API: records each request; fails the first delivery of
    // offset 2 with a 503 so the retry (same keys) is exercised.
    let received: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
    let failed_once = Arc::new(Mutex::new(false));
    let (r, f) = (received.clone(), failed_once.clone());
    let api = axum::Router::new().route(
        "/orders",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let (r, f) = (r.clone(), f.clone());
            async move {
                let key = headers
                    .get("idempotency-key")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                if key.ends_with("-0-2") && !std::mem::replace(&mut *f.lock().unwrap(), true) {
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
                r.lock()
                    .unwrap()
                    .push((key, serde_json::from_str(&body).unwrap_or(Value::Null)));
                StatusCode::CREATED
            }
        }),
    );
    let api_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_url = format!("http://{}/orders", api_listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(api_listener, api).await.unwrap() });

    let env = InProcess::start_with_plugins(vec![plugin_dir()]);
    env.broker.create_topic("api-orders", 1).await.unwrap();
    let base = serve(&env).await;
    let http = reqwest::Client::new();
    let plugins: Value = http
        .get(format!("{base}/connector-plugins"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sink = plugins
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["class"] == "http-sink")
        .expect("the plugin is listed");
    assert_eq!(
        (sink["type"].as_str(), sink["version"].as_str()),
        (Some("sink"), Some("0.1.0"))
    );
    assert!(
        !plugins
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["class"].as_str().is_some_and(|c| c.contains("wrong")))
    );

    let bad = http
        .put(format!("{base}/connectors/api/config"))
        .json(&json!({"connector.class": "http-sink", "topics": "api-orders", "http.url": "ftp://nope"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400, "the plugin validates its own keys");
    let body: Value = bad.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("http.url"),
        "{body}"
    );

    let created = http
        .put(format!("{base}/connectors/api/config"))
        .json(&json!({"connector.class": "http-sink", "topics": "api-orders", "http.url": api_url, "errors.retry.delay.max.ms": "200"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let values: Vec<Vec<u8>> = (0..5)
        .map(|i| format!(r#"{{"order_id": {i}}}"#).into_bytes())
        .collect();
    let refs: Vec<(Option<&str>, &[u8])> = values.iter().map(|v| (None, v.as_slice())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), "api-orders", &refs).await;

    let got = fixtures::eventually(
        Duration::from_secs(120),
        "every order at the API",
        || async {
            let got = received.lock().unwrap().clone();
            let keys: std::collections::BTreeSet<&str> =
                got.iter().map(|(k, _)| k.as_str()).collect();
            (keys.len() == 5).then_some(got)
        },
    )
    .await;
    for (key, body) in &got {
        let offset: i64 = key.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(
            key,
            &format!("api-orders-0-{offset}"),
            "key from topic, partition and offset"
        );
        assert_eq!(body["order_id"], offset, "the record's value is the body");
    }
    assert!(
        *failed_once.lock().unwrap(),
        "the 503 happened and was retried"
    );
    let status = env.worker.status("api").await.unwrap();
    assert_eq!(
        status.tasks[0].1.state,
        sluice_runtime::task::State::Running
    );
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_libraries_are_skipped_with_reasons_and_the_worker_serves() {
    let (registry, failures) =
        sluice_runtime::plugin::Registry::with_native(&[plugin_dir()], Default::default());
    let reason = |name: &str| {
        failures
            .iter()
            .find(|(p, _)| p.ends_with(name))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("{name} not reported: {failures:?}"))
    };
    assert!(
        reason("libsluice_test_wrong_abi.so")
            .contains("built for plugin ABI version 999, but this worker speaks version 1"),
        "{failures:?}"
    );
    assert!(
        reason("not-a-library.so").contains("not a loadable shared library"),
        "{failures:?}"
    );
    assert!(registry.find("http-sink").is_some() && registry.find("panicky-sink").is_some());

    // A worker with that plugin.path still starts and serves.
    let env =
        InProcess::start_with_plugins(vec![plugin_dir(), PathBuf::from("/nonexistent/plugins")]);
    let base = serve(&env).await;
    let health = reqwest::get(format!("{base}/health")).await.unwrap();
    assert_eq!(health.status(), 200);
    let plugins: Value = reqwest::get(format!("{base}/connector-plugins"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let classes: Vec<&str> = plugins
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["class"].as_str())
        .collect();
    assert!(
        classes.contains(&"http-sink") && classes.contains(&"datagen"),
        "{classes:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_in_put_fails_only_its_task() {
    let env = InProcess::start_with_plugins(vec![plugin_dir()]);
    env.broker.create_topic("boom", 1).await.unwrap();
    env.broker.create_topic("calm", 1).await.unwrap();
    env.create(
        json!({"name": "panicky", "config": {"connector.class": "panicky-sink", "topics": "boom"}}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("calm.jsonl");
    env.create(json!({"name": "calm", "config": {"connector.class": "file-sink", "topics": "calm", "file": out.display().to_string()}})).await;
    fixtures::produce(
        env.broker.bootstrap_servers(),
        "boom",
        &[(None, b"fine"), (None, b"panic")],
    )
    .await;
    let trace = env.failed_trace("panicky").await;
    assert!(
        trace.contains("the plugin panicked: boom in put"),
        "{trace}"
    );

    // The worker and its other connectors carry on.
    fixtures::produce(
        env.broker.bootstrap_servers(),
        "calm",
        &[(None, br#"{"ok": true}"#)],
    )
    .await;
    fixtures::eventually(
        Duration::from_secs(120),
        "the other connector's record",
        || async {
            (std::fs::read_to_string(&out).unwrap_or_default() == "{\"ok\": true}\n").then_some(())
        },
    )
    .await;
    let calm = env.worker.status("calm").await.unwrap();
    assert_eq!(calm.tasks[0].1.state, sluice_runtime::task::State::Running);
    env.worker.shutdown().await;
}
