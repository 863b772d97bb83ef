//! A config update naming a new transform module is swapped in at a batch
//! boundary, over the REST API, while records flow: nothing lost, nothing
//! duplicated, the task not restarted; a module that fails to load is
//! refused and the running one stays.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::{self, InProcess};

#[tokio::test(flavor = "multi_thread")]
async fn a_new_module_is_swapped_in_without_loss_or_duplicates() {
    let env = InProcess::start();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let v1 = dir.path().join("v1.wasm");
    let v2 = dir.path().join("v2.wasm");
    std::fs::copy(fixtures::example_component(), &v1).unwrap();
    std::fs::copy(fixtures::example_component(), &v2).unwrap();
    let broken = dir.path().join("broken.wasm");
    std::fs::write(&broken, b"\0asm but not really").unwrap();
    let out = dir.path().join("out.jsonl");
    const COUNT: u64 = 800;
    let source = |module: &std::path::Path, version: &str| {
        json!({
            "connector.class": "datagen", "topic": "swap", "rate": "100", "count": COUNT.to_string(),
            "batch.size": "20",
            "transforms": "stamp", "transforms.stamp.type": "wasm",
            "transforms.stamp.module": module.display().to_string(),
            "transforms.stamp.add.field": "version", "transforms.stamp.add.value": version,
        })
    };
    let http = reqwest::Client::new();
    let put = |name: &str, config: Value| {
        let http = http.clone();
        let url = format!("{base}/connectors/{name}/config");
        async move { http.put(url).json(&config).send().await.unwrap() }
    };
    let created = put("gen", source(&v1, "v1")).await;
    assert_eq!(created.status(), 201);
    assert_eq!(created.headers()["sluice-config-update"], "created");
    let sink = put("out", json!({"connector.class": "FileStreamSink", "topics": "swap", "file": out.display().to_string()})).await;
    assert_eq!(sink.status(), 201);

    let lines = |path: std::path::PathBuf| async move {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .count()
    };
    // Swap while the source is mid-way: after its first 100 records.
    let produced = || {
        let metrics = env.worker.metrics().render();
        metrics
            .lines()
            .find(|l| {
                l.starts_with(
                    r#"sluice_records_total{connector="gen",outcome="ok",stage="produce""#,
                )
            })
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    fixtures::eventually(
        Duration::from_secs(180),
        "the source's first records",
        || async { (produced() >= 100).then_some(()) },
    )
    .await;
    let swapped = put("gen", source(&v2, "v2")).await;
    assert_eq!(swapped.status(), 200);
    assert_eq!(
        swapped.headers()["sluice-config-update"],
        "transforms-swapped"
    );

    let refused = put("gen", source(&broken, "v3")).await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("key `transforms.stamp.module`") && message.contains("broken.wasm"),
        "{message}"
    );
    let config: Value = http
        .get(format!("{base}/connectors/gen/config"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        config["transforms.stamp.add.value"], "v2",
        "the refused update left the running config alone"
    );

    fixtures::eventually(
        Duration::from_secs(180),
        "every record in the file",
        || async { (lines(out.clone()).await as u64 >= COUNT).then_some(()) },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = std::fs::read_to_string(&out).unwrap();
    let mut versions: BTreeMap<u64, String> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let id = v["order_id"].as_u64().unwrap();
        let previous = versions.insert(id, v["version"].as_str().unwrap().to_string());
        assert!(previous.is_none(), "order {id} delivered twice");
    }
    assert_eq!(
        versions.keys().copied().collect::<Vec<_>>(),
        (1..=COUNT).collect::<Vec<_>>(),
        "every order exactly once"
    );
    // In source order the version steps once from v1 to v2: the swap
    // happened at one batch boundary.
    let sequence: Vec<&str> = versions.values().map(String::as_str).collect();
    let first_v2 = sequence
        .iter()
        .position(|v| *v == "v2")
        .expect("v2 was swapped in");
    assert!(
        first_v2 >= 100,
        "v1 ran first, for at least the first 100 records (swapped at {first_v2})"
    );
    assert!(
        first_v2 < COUNT as usize - 100,
        "the swap was not delayed: first v2 at {first_v2}"
    );
    assert!(
        sequence[first_v2..].iter().all(|v| *v == "v2"),
        "after the swap only v2: {sequence:?}"
    );
    assert!(sequence[..first_v2].iter().all(|v| *v == "v1"));

    let status: Value = http
        .get(format!("{base}/connectors/gen/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    env.worker.shutdown().await;
}
