//! Split brain: the same task of the same connector runs on two workers at
//! once (a zombie that did not notice it lost its slot). The newer instance
//! fences the older one through the transactional id, so only one of them
//! ever commits: the output holds every record exactly once.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    assert_exactly_once_in_order, broker, create_topic, get_json, high_watermarks, metric_sum,
    produce_numbered, read_committed, unique, worker_url, write_connector, write_worker,
};
use crate::fixtures::{SluiceProcess, eventually};

#[tokio::test(flavor = "multi_thread")]
async fn the_same_task_on_two_workers_commits_from_one_of_them_only() {
    const PARTITIONS: i32 = 2;
    const PER_PARTITION: u64 = 10_000;
    let bootstrap = broker().bootstrap.clone();
    let (input, output) = (unique("split-in"), unique("split-out"));
    create_topic(&bootstrap, &input, PARTITIONS).await;
    create_topic(&bootstrap, &output, PARTITIONS).await;
    produce_numbered(&bootstrap, &input, PARTITIONS, PER_PARTITION).await;

    let dir = tempfile::tempdir().unwrap();
    // One cluster name for both: the same transactional ids.
    let group = json!({"group.id": unique("split-brain")});
    let worker_a = write_worker(dir.path(), &bootstrap, "a", group.clone());
    let worker_b = write_worker(dir.path(), &bootstrap, "b", group);
    let name = unique("split");
    let connector = write_connector(
        dir.path(),
        &name,
        json!({
            "connector.class": "stream",
            "tasks.max": "1",
            "topics": input,
            "output.topic": output,
            "delivery.guarantee": "exactly-once",
            "batch.max.records": "100",
            // The zombie's partitions reach the survivor after this.
            "consumer.override.session.timeout.ms": "10000",
            "consumer.override.heartbeat.interval.ms": "1000",
        }),
    );
    let (url_a, url_b) = (worker_url(&worker_a), worker_url(&worker_b));
    let mut a = SluiceProcess::start(dir.path(), &[&worker_a, &connector]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while high_watermarks(&bootstrap, &output) == 0 {
        assert!(
            Instant::now() < deadline,
            "A never wrote:\n{}",
            a.log_text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let committed_by_a_before = metric_sum(
        &url_a,
        "sluice_transactions_total",
        &["outcome=\"committed\""],
    )
    .await;
    assert!(committed_by_a_before > 0.0, "A committed before B started");

    // B starts the same task: its producer fences A's.
    let mut b = SluiceProcess::start(dir.path(), &[&worker_b, &connector]);
    let trace = eventually(
        Duration::from_secs(90),
        "A's task to fail, fenced",
        || async {
            let status = get_json(&url_a, &format!("/connectors/{name}/status")).await?;
            let task = &status["tasks"][0];
            (task["state"] == "FAILED").then(|| task["trace"].as_str().unwrap_or("").to_string())
        },
    )
    .await;
    assert!(
        trace.to_lowercase().contains("fenc"),
        "A failed for another reason: {trace}"
    );
    let committed_by_a = metric_sum(
        &url_a,
        "sluice_transactions_total",
        &["outcome=\"committed\""],
    )
    .await;
    assert!(
        metric_sum(&url_a, "sluice_transactions_total", &["outcome=\"fenced\""]).await > 0.0,
        "A counted its fencing"
    );
    // The failed zombie is stopped as an operator would; B takes its partitions.
    a.terminate(Duration::from_secs(30));

    let total = PARTITIONS as usize * PER_PARTITION as usize;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let seen = read_committed(&bootstrap, &output).len();
        if seen >= total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{seen} of {total} records reached {output}:\n{}",
            b.log_text()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status_b = get_json(&url_b, &format!("/connectors/{name}/status"))
        .await
        .unwrap();
    assert_eq!(status_b["tasks"][0]["state"], "RUNNING", "{status_b}");
    b.terminate(Duration::from_secs(30));
    assert_exactly_once_in_order(
        &read_committed(&bootstrap, &output),
        PARTITIONS,
        PER_PARTITION,
        &format!("split brain (A committed {committed_by_a} transactions, before it was fenced)"),
    );
}
