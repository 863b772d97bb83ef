//! The exactly-once JDBC sink (rows and offsets in one PostgreSQL
//! transaction) on a real broker: killed with SIGKILL at random moments, and
//! with KIP-848's consumer group protocol moving partitions between two
//! workers while batches are held.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{
    broker, create_topic, produce_numbered_paced, produce_numbered_until, unique, write_connector,
    write_worker,
};
use crate::fixtures::{self, PgInstance, SluiceProcess};

#[tokio::test(flavor = "multi_thread")]
async fn the_exactly_once_jdbc_sink_loses_and_duplicates_nothing_across_sigkills() {
    let bootstrap = broker().bootstrap.clone();
    let topic = unique("crash-orders");
    create_topic(&bootstrap, &topic, 3).await;
    crate::crash::sigkill_harness(
        &bootstrap,
        &topic,
        &format!("{}-", unique("crash")),
        json!({"listeners": format!("http://127.0.0.1:{}", fixtures::free_port())}),
    )
    .await;
}

/// Two workers run the same sink connector's tasks in one group on KIP-848's
/// protocol (`group.protocol=consumer`: the broker assigns, revocations
/// arrive while batches are in flight and are held until they commit), then
/// one of them stops: every record lands exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn kip848_revocations_while_batches_are_held_lose_and_duplicate_nothing() {
    const PARTITIONS: i32 = 6;
    // Records a partition in the first and in the last wave.
    const WAVE: u64 = 1000;
    let Some(pg) = PgInstance::start() else {
        return;
    };
    let bootstrap = broker().bootstrap.clone();
    let input = unique("kip848");
    create_topic(&bootstrap, &input, PARTITIONS).await;
    let dir = tempfile::tempdir().unwrap();
    let worker_a = write_worker(dir.path(), &bootstrap, "a", json!({}));
    let worker_b = write_worker(dir.path(), &bootstrap, "b", json!({}));
    let name = unique("kip848-sink");
    let connector = write_connector(
        dir.path(),
        &name,
        json!({
            "connector.class": "jdbc-sink",
            "tasks.max": "3",
            "topics": input,
            "connection.url": pg.url(),
            "delivery.guarantee": "exactly-once",
            "insert.mode": "insert",
            "auto.create": "true",
            "table.name.format": "kip848_rows",
            // A batch fills for a second while the input flows: partitions
            // revoked then find one in flight (with batches closed after
            // 100 ms, bursts of input left the tasks idle a fifth of the
            // time, and a revocation found none on a loaded CI machine).
            "batch.max.records": "500",
            "batch.max.ms": "1000",
            "batch.linger.ms": "1000",
            "consumer.override.group.protocol": "consumer",
            "errors.infrastructure.retry.timeout": "-1",
        }),
    );
    let rows = || {
        let url = pg.url();
        async move {
            fixtures::db_rows(
                &url,
                "SELECT CAST(COUNT(*) AS TEXT), CAST(COUNT(DISTINCT (p, seq)) AS TEXT) \
                 FROM kip848_rows",
            )
            .await
            .first()
            .map(|r| (r[0].parse::<u64>().unwrap(), r[1].parse::<u64>().unwrap()))
            .unwrap_or((0, 0))
        }
    };
    let rows_now = || async {
        if fixtures::table_exists(&pg.url(), "kip848_rows").await {
            rows().await.0
        } else {
            0
        }
    };

    // The input arrives in three waves: A alone, then A and B (partitions
    // move to B while A holds batches), then B alone after A stops. The
    // first and last are `WAVE` records a partition; the second flows,
    // a record a partition every few milliseconds, for at least 10 s and
    // until A's revocation met a batch in flight: however long B takes to
    // join on a loaded machine, the input still flows when partitions move.
    let mut a = SluiceProcess::start(dir.path(), &[&worker_a, &connector]);
    produce_numbered_paced(&bootstrap, &input, PARTITIONS, 0..WAVE, 10, Duration::ZERO).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    while rows_now().await == 0 {
        assert!(
            Instant::now() < deadline,
            "A wrote nothing:\n{}",
            a.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stop_flowing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flowing = tokio::spawn({
        let (bootstrap, input, stop) = (bootstrap.clone(), input.clone(), stop_flowing.clone());
        async move {
            produce_numbered_until(
                &bootstrap,
                &input,
                PARTITIONS,
                WAVE,
                1,
                Duration::from_millis(5),
                &stop,
            )
            .await
        }
    });
    let flowed_for = Instant::now();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut b = SluiceProcess::start(dir.path(), &[&worker_b, &connector]);
    // Partitions move from A's members to B's while A runs and holds batches.
    let deadline = Instant::now() + Duration::from_secs(90);
    while !b.log_text().contains("rebalance: partitions assigned") {
        assert!(
            Instant::now() < deadline,
            "B never got partitions while A ran:\n{}",
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // ... and A's members gave them up while batches were in flight: the
    // revocation waited for the batch's commit.
    while !a
        .log_text()
        .contains("rebalance: revocation waits for the batch in flight")
    {
        assert!(
            Instant::now() < deadline,
            "no revocation of A's found a batch in flight (the input flows while B joins):\n{}",
            a.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The second wave flows for at least 10 s.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(flowed_for.elapsed())).await;
    stop_flowing.store(true, std::sync::atomic::Ordering::SeqCst);
    let second_wave_end = flowing.await.unwrap();
    a.terminate(Duration::from_secs(60));
    let end = second_wave_end + WAVE;
    produce_numbered_paced(
        &bootstrap,
        &input,
        PARTITIONS,
        second_wave_end..end,
        10,
        Duration::ZERO,
    )
    .await;
    let total = PARTITIONS as u64 * end;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (count, distinct) = rows().await;
        if distinct >= total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{distinct} of {total} records written ({count} rows):\n--- a ---\n{}\n--- b ---\n{}",
            a.log_text(),
            b.log_text()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    b.terminate(Duration::from_secs(60));
    assert_eq!(
        rows().await,
        (total, total),
        "one row per record (rows, distinct (p, seq)) through KIP-848 revocations\n--- a ---\n{}\n--- b ---\n{}",
        a.log_text(),
        b.log_text()
    );
}
