//! Crash harness: the `sluice` process is killed with SIGKILL at random
//! moments while it sinks a topic into PostgreSQL, restarted each time,
//! and the database is restarted once under load. The broker lives in this
//! process and survives (the real-Kafka suite runs the same harness on
//! Apache Kafka: `real_kafka::jdbc_sink`). End state:
//!
//! - exactly-once, `insert.mode=insert` with no key (a duplicate would be a
//!   second row): exactly one row per input record;
//! - at-least-once upsert: every record present, no gaps.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::fixtures::{self, KillSchedule, PgInstance, SluiceProcess};

/// Records arrive in waves, one before each run, so every run has work in
/// flight when it is killed.
const WAVES: usize = 7;
const WAVE: usize = 2000;
const RECORDS: usize = WAVES * WAVE;
const TOPIC: &str = "crash-orders";

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_at_random_moments_loses_and_duplicates_nothing() {
    let broker = sluice_runtime::kafka::EmbeddedBroker::start().unwrap();
    broker.create_topic(TOPIC, 3).await.unwrap();
    sigkill_harness(broker.bootstrap_servers(), TOPIC, "", json!({})).await;
}

/// The harness, on any broker: `topic` exists with partition 0, connectors
/// are named `<names>eos` and `<names>alo`, and the worker file gets
/// `worker_extra`'s keys.
pub async fn sigkill_harness(
    bootstrap: &str,
    topic: &str,
    names: &str,
    worker_extra: serde_json::Value,
) {
    let Some(pg) = PgInstance::start() else {
        return;
    };
    let bootstrap = bootstrap.to_string();
    let produce_wave = |wave: usize| {
        let (bootstrap, topic) = (bootstrap.clone(), topic.to_string());
        async move {
            let bodies: Vec<(String, Vec<u8>)> = (wave * WAVE..(wave + 1) * WAVE)
                .map(|i| {
                    (
                        format!("{i}"),
                        json!({"id": i, "amount": i % 97, "status": "new"})
                            .to_string()
                            .into_bytes(),
                    )
                })
                .collect();
            let records: Vec<(Option<&str>, &[u8])> = bodies
                .iter()
                .map(|(k, v)| (Some(k.as_str()), v.as_slice()))
                .collect();
            fixtures::produce(&bootstrap, &topic, &records).await;
        }
    };

    let dir = tempfile::tempdir().unwrap();
    let worker = dir.path().join("worker.json");
    let mut worker_config = json!({"bootstrap.servers": bootstrap, "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string()});
    for (k, v) in worker_extra.as_object().into_iter().flatten() {
        worker_config[k] = v.clone();
    }
    std::fs::write(&worker, worker_config.to_string()).unwrap();
    // A dead member is noticed after the session timeout: keep it short so
    // each restart gets its partitions back quickly.
    let consumer = [
        ("consumer.override.session.timeout.ms", "6000"),
        ("consumer.override.heartbeat.interval.ms", "500"),
    ];
    let mut exactly_once = json!({
        "connector.class": "jdbc-sink",
        "topics": topic,
        "connection.url": pg.url(),
        "delivery.guarantee": "exactly-once",
        "insert.mode": "insert",
        "auto.create": "true",
        "table.name.format": "eos_rows",
        "batch.max.records": "10",
        "errors.infrastructure.retry.timeout": "-1",
    });
    let mut at_least_once = json!({
        "connector.class": "jdbc-sink",
        "topics": topic,
        "connection.url": pg.url(),
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
        "table.name.format": "alo_rows",
        "batch.max.records": "100",
        "errors.infrastructure.retry.timeout": "-1",
    });
    for (k, v) in consumer {
        exactly_once[k] = json!(v);
        at_least_once[k] = json!(v);
    }
    let eos_file = dir.path().join("eos.json");
    let alo_file = dir.path().join("alo.json");
    std::fs::write(
        &eos_file,
        json!({"name": format!("{names}eos"), "config": exactly_once}).to_string(),
    )
    .unwrap();
    std::fs::write(
        &alo_file,
        json!({"name": format!("{names}alo"), "config": at_least_once}).to_string(),
    )
    .unwrap();
    let args = [worker.as_path(), eos_file.as_path(), alo_file.as_path()];

    let mut schedule = KillSchedule::from_env();
    let seed = schedule.seed;
    let count = |table: &'static str| {
        let url = pg.url();
        async move {
            fixtures::db_rows(
                &url,
                &format!(
                    "SELECT CAST(COUNT(*) AS TEXT), CAST(COUNT(DISTINCT id) AS TEXT) FROM {table}"
                ),
            )
            .await
        }
    };
    let exists = |table: &'static str| {
        let url = pg.url();
        async move { fixtures::table_exists(&url, table).await }
    };

    let rows_now = || async {
        if exists("eos_rows").await {
            count("eos_rows").await[0][0].parse::<usize>().unwrap()
        } else {
            0
        }
    };
    // Each run: a new wave arrives; once the sink is writing it, the
    // process is killed a random moment later. Bounded in time.
    let started = Instant::now();
    let mut mid_stream = 0;
    for wave in 0..WAVES - 1 {
        produce_wave(wave).await;
        let before = rows_now().await;
        let mut sluice = SluiceProcess::start(dir.path(), &args);
        let deadline = Instant::now() + Duration::from_secs(60);
        while rows_now().await == before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let wait = schedule.next_ms(0, 150);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        sluice.child.kill().unwrap();
        sluice.child.wait().unwrap();
        let after = rows_now().await;
        let produced = (wave + 1) * WAVE;
        if after > before && after < produced {
            mid_stream += 1;
        }
        eprintln!(
            "run {wave}: killed {wait} ms into writing, {after} of {produced} exactly-once rows"
        );
        if started.elapsed() > Duration::from_secs(240) {
            break;
        }
    }
    assert!(
        mid_stream > 0,
        "no kill landed while records were being written (seed {seed}): the harness proved nothing"
    );

    // The last run, with a database restart in the middle of it.
    produce_wave(WAVES - 1).await;
    let mut sluice = SluiceProcess::start(dir.path(), &args);
    tokio::time::sleep(Duration::from_millis(schedule.next_ms(2000, 6000))).await;
    pg.down();
    tokio::time::sleep(Duration::from_secs(3)).await;
    pg.up();
    let done = |table: &'static str| {
        let (count, exists, sluice) = (&count, &exists, &sluice);
        async move {
            let deadline = Instant::now() + Duration::from_secs(180);
            loop {
                if exists(table).await {
                    let c = count(table).await;
                    if c[0][1] == RECORDS.to_string() {
                        return c[0].clone();
                    }
                }
                assert!(
                    Instant::now() < deadline,
                    "{RECORDS} distinct ids never reached {table} (seed {seed}):\n{}",
                    sluice.log_text()
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let eos = done("eos_rows").await;
    let alo = done("alo_rows").await;
    // Give a duplicate the chance to appear before judging.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let eos_final = count("eos_rows").await[0].clone();
    assert_eq!(
        eos_final,
        vec![RECORDS.to_string(), RECORDS.to_string()],
        "exactly-once: one row per record (rows, distinct ids), seed {seed}; was {eos:?}.\n{}",
        sluice.log_text()
    );
    assert_eq!(alo[1], RECORDS.to_string(), "at-least-once: no gaps");
    assert!(
        sluice
            .log_text()
            .contains("positions restored from the offsets stored in the sink")
    );
    let _ = sluice.terminate(Duration::from_secs(30));
}
