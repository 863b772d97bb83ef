//! The quick-start pipeline end to end, through the real `sluice` binary:
//! datagen -> WASM transform -> embedded broker -> SQLite.

use std::time::Duration;

use serde_json::Value;
use sluice_connector_datagen::{DatagenConfig, generate};

use crate::fixtures::{self, SluiceProcess};

const COUNT: u64 = 300;

fn load(name: &str) -> Value {
    let path = fixtures::repo_root().join("examples/quickstart").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn quickstart_pipeline_delivers_exactly_the_generated_keys_transformed() {
    let component = fixtures::example_component();
    let dir = tempfile::tempdir().unwrap();
    let port = fixtures::free_port();

    // The shipped quick-start configs, pointed at this test's files.
    let mut worker = load("worker.json");
    worker["listeners"] = Value::String(format!("http://127.0.0.1:{port}"));
    let mut source = load("datagen.json");
    source["config"]["count"] = Value::String(COUNT.to_string());
    source["config"]["rate"] = Value::String("0".into());
    source["config"]["transforms.enrich.module"] = Value::String(component.display().to_string());
    let mut sink = load("jdbc-sink.json");
    let db = dir.path().join("quickstart.db");
    sink["config"]["connection.url"] = Value::String(format!("jdbc:sqlite:{}", db.display()));
    let files: Vec<_> = [
        ("worker.json", &worker),
        ("datagen.json", &source),
        ("jdbc-sink.json", &sink),
    ]
    .iter()
    .map(|(name, json)| {
        let path = dir.path().join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(json).unwrap()).unwrap();
        path
    })
    .collect();
    let args: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
    let mut sluice = SluiceProcess::start(dir.path(), &args);

    let rows = fixtures::eventually(Duration::from_secs(180), "all rows in SQLite", || async {
        let rows = fixtures::sqlite_rows(
            &db,
            "SELECT order_id, customer_id, amount, currency, status, updated_at, pipeline FROM orders ORDER BY order_id",
        )
        .await;
        (rows.len() as u64 >= COUNT).then_some(rows)
    })
    .await;

    // Exactly the generated keys, each transformed by the WASM component.
    let cfg_map = source["config"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| ["topic", "seed", "key.field", "count"].contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let cfg = DatagenConfig::parse(&cfg_map).unwrap();
    assert_eq!(rows.len() as u64, COUNT);
    for (seq, row) in (0..COUNT).zip(&rows) {
        let (_, value) = generate(&cfg, seq);
        let v: Value = serde_json::from_slice(&value).unwrap();
        let expected = vec![
            v["order_id"].to_string(),
            v["customer_id"].as_str().unwrap().to_string(),
            v["amount"].as_f64().unwrap().to_string(),
            v["currency"].as_str().unwrap().to_string(),
            v["status"].as_str().unwrap().to_uppercase(),
            v["updated_at"].as_str().unwrap().to_string(),
            "quickstart".to_string(),
        ];
        assert_eq!(row, &expected, "row for sequence {seq}");
    }

    // The REST API reports both connectors running, and the metrics count
    // every record once.
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for name in ["orders-datagen", "orders-to-sqlite"] {
        let status: Value = http
            .get(format!("{base}/connectors/{name}/status"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
        assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    }
    let names: Value = http
        .get(format!("{base}/connectors"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        names,
        serde_json::json!(["orders-datagen", "orders-to-sqlite"])
    );
    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        format!(
            "sluice_records_total{{connector=\"orders-datagen\",outcome=\"ok\",stage=\"produce\",task=\"0\"}} {COUNT}"
        ),
        format!(
            "sluice_records_total{{connector=\"orders-to-sqlite\",outcome=\"ok\",stage=\"put\",task=\"0\"}} {COUNT}"
        ),
    ] {
        assert!(
            metrics.contains(&series),
            "missing `{series}` in:\n{metrics}"
        );
    }

    // SIGTERM: a clean, prompt stop.
    let status = sluice.terminate(Duration::from_secs(20));
    let log = sluice.log_text();
    assert!(status.success(), "exit {status:?}:\n{log}");
    assert!(
        log.contains("embedded development broker"),
        "no embedded-broker warning:\n{log}"
    );
    assert!(log.contains("stopped"), "{log}");
}
