//! With `errors.tolerance=none` (the default), a bad record fails its task,
//! the trace names it, and no offset moves past it; a position that is gone
//! from the broker is reported as data loss, never skipped.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::json;

use crate::fixtures::{self, InProcess};

/// The group's committed offset on partition 0, if any.
pub fn committed_offset(bootstrap: &str, group: &str, topic: &str) -> Option<i64> {
    match committed(bootstrap, group, topic) {
        Offset::Offset(o) => Some(o),
        _ => None,
    }
}

fn committed(bootstrap: &str, group: &str, topic: &str) -> Offset {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let c = consumer
        .committed_offsets(tpl, Duration::from_secs(10))
        .unwrap();
    c.elements()[0].offset()
}

#[tokio::test(flavor = "multi_thread")]
async fn poison_record_fails_the_task_and_nothing_passes_it() {
    let env = InProcess::start();
    env.broker.create_topic("orders-in", 1).await.unwrap();
    let good = |id: u32| format!(r#"{{"order_id": {id}, "amount": 1.5}}"#).into_bytes();
    let (g0, g1, g2, g4) = (good(0), good(1), good(2), good(4));
    fixtures::produce(
        env.broker.bootstrap_servers(),
        "orders-in",
        &[
            (None, &g0),
            (None, &g1),
            (None, &g2),
            (None, b"{\"order_id\": 3, trunc"),
            (None, &g4),
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("out.db");
    env.create(json!({"name": "poisoned", "config": {
        "connector.class": "jdbc-sink", "topics": "orders-in",
        "connection.url": format!("jdbc:sqlite:{}", db.display()),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id", "auto.create": "true",
        "transforms": "enrich", "transforms.enrich.type": "wasm",
        "transforms.enrich.module": fixtures::example_component().display().to_string(),
    }}))
    .await;
    let trace = env.failed_trace("poisoned").await;
    assert!(
        trace.contains("orders-in-0@3"),
        "trace names the record: {trace}"
    );
    assert!(
        trace.contains("transform `enrich`") && trace.contains("not JSON"),
        "trace names the cause: {trace}"
    );

    // Nothing was committed past the poison record, and nothing after it was written.
    match committed(
        env.broker.bootstrap_servers(),
        "connect-poisoned",
        "orders-in",
    ) {
        Offset::Offset(o) => assert!(o <= 3, "committed offset {o} passes the poison record at 3"),
        other => assert!(
            matches!(other, Offset::Invalid),
            "unexpected committed offset {other:?}"
        ),
    }
    let rows = fixtures::sqlite_rows(&db, "SELECT order_id FROM orders ORDER BY order_id").await;
    assert!(
        rows.iter().all(|r| r[0].parse::<i64>().unwrap() < 3),
        "rows past the poison record: {rows:?}"
    );
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_position_gone_from_the_broker_is_data_loss_not_a_skip() {
    let env = InProcess::start();
    env.broker.create_topic("lossy", 1).await.unwrap();
    let value = br#"{"n": 1}"#;
    fixtures::produce(
        env.broker.bootstrap_servers(),
        "lossy",
        &[(None, value), (None, value)],
    )
    .await;
    // The group's committed position points past what the broker has, as
    // after the embedded broker dropped data or a cluster lost a log.
    let committer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", env.broker.bootstrap_servers())
        .set("group.id", "connect-lossy-sink")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("lossy", 0, Offset::Offset(100))
        .unwrap();
    committer.commit(&tpl, CommitMode::Sync).unwrap();
    drop(committer);

    let dir = tempfile::tempdir().unwrap();
    env.create(json!({"name": "lossy-sink", "config": {
        "connector.class": "file-sink", "topics": "lossy", "file": dir.path().join("out.jsonl").display().to_string(),
    }}))
    .await;
    let trace = env.failed_trace("lossy-sink").await;
    assert!(trace.contains("data loss"), "{trace}");
    assert!(trace.contains("lossy-0"), "the partition is named: {trace}");
    let metrics = env.worker.metrics().render();
    assert!(
        metrics.contains(
            r#"sluice_data_loss_total{connector="lossy-sink",partition="0",topic="lossy"} 1"#
        ),
        "{metrics}"
    );
    // Nothing was written and the position did not move.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap_or_default(),
        ""
    );
    assert_eq!(
        committed(
            env.broker.bootstrap_servers(),
            "connect-lossy-sink",
            "lossy"
        ),
        Offset::Offset(100)
    );
    env.worker.shutdown().await;
}
