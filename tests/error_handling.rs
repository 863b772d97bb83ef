//! errors.tolerance, retries and the dead-letter queue at every stage, with
//! poison records sent by an outside producer; a database outage; replay.

use std::time::Duration;

use rdkafka::Message;
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};

use crate::fixtures::{self, InProcess, header};

/// Sends records with a key, a header and a fixed timestamp, so the dead
/// letters can be checked to carry them unchanged.
async fn send(bootstrap: &str, topic: &str, values: &[&[u8]]) {
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    for (i, v) in values.iter().enumerate() {
        let key = format!("k{i}");
        let headers = OwnedHeaders::new().insert(KafkaHeader {
            key: "trace-id",
            value: Some(format!("t{i}").as_bytes()),
        });
        let r: FutureRecord<'_, str, [u8]> = FutureRecord::to(topic)
            .key(key.as_str())
            .payload(*v)
            .partition(0)
            .headers(headers)
            .timestamp(1_700_000_000_000 + i as i64);
        producer
            .send(r, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

fn metric(env: &InProcess, prefix: &str) -> u64 {
    let text = env.worker.metrics().render();
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn sqlite_orders(db: &std::path::Path, not_null: bool) {
    let constraint = if not_null { " NOT NULL" } else { "" };
    let conn = std::process::Command::new("python3")
        .args([
            "-c",
            &format!(
                "import sqlite3; c=sqlite3.connect('{}'); c.execute('DROP TABLE IF EXISTS pay'); c.execute('CREATE TABLE pay (order_id INTEGER PRIMARY KEY, customer TEXT{constraint}, amount REAL)'); c.commit()",
                db.display()
            ),
        ])
        .status()
        .unwrap();
    assert!(conn.success());
}

fn sink_config(db: &std::path::Path, tolerance: &str) -> Value {
    json!({
        "connector.class": "jdbc-sink", "topics": "pay",
        "connection.url": format!("jdbc:sqlite:{}", db.display()),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "transforms": "chaos", "transforms.chaos.type": "wasm",
        "transforms.chaos.module": fixtures::test_guest("chaos").display().to_string(),
        "errors.tolerance": tolerance,
        "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": "pay-dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.deadletterqueue.topic.replication.factor": "1",
    })
}

const POISON: [&[u8]; 7] = [
    br#"{"order_id": 1, "customer": "ann", "amount": 1.5}"#,
    b"{bad json",                         // TASK_PUT, MalformedJson
    b"trap",                              // TRANSFORMATION, TransformTrap
    b"error:data",                        // TRANSFORMATION, DataError
    br#"{"order_id": 5, "amount": 2.0}"#, // TASK_PUT, ConstraintViolation (NOT NULL)
    &[0xff, 0xfe, 0x00],                  // VALUE_CONVERTER, InvalidUtf8
    br#"{"order_id": 7, "customer": "bob", "amount": 3.0}"#,
];

#[tokio::test(flavor = "multi_thread")]
async fn tolerance_all_dead_letters_every_poison_record_with_its_context() {
    let env = InProcess::start();
    env.broker.create_topic("pay", 1).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pay.db");
    sqlite_orders(&db, true);
    send(env.broker.bootstrap_servers(), "pay", &POISON).await;
    env.create(json!({"name": "pay-sink", "config": sink_config(&db, "all")}))
        .await;

    let bootstrap = env.broker.bootstrap_servers().to_string();
    let letters = fixtures::eventually(Duration::from_secs(180), "five dead letters", || {
        let bootstrap = bootstrap.clone();
        async move {
            let letters =
                tokio::task::spawn_blocking(move || fixtures::read_topic(&bootstrap, "pay-dlq"))
                    .await
                    .ok()?;
            (letters.len() >= 5).then_some(letters)
        }
    })
    .await;
    assert_eq!(letters.len(), 5, "exactly the five bad records");
    let expected = [
        (1, "TASK_PUT", "MalformedJson"),
        (2, "TRANSFORMATION", "TransformTrap"),
        (3, "TRANSFORMATION", "DataError"),
        (4, "TASK_PUT", "ConstraintViolation"),
        (5, "VALUE_CONVERTER", "InvalidUtf8"),
    ];
    let mut seen: Vec<(i64, String, String)> = letters
        .iter()
        .map(|m| {
            (
                header(m, "__connect.errors.offset")
                    .unwrap()
                    .parse()
                    .unwrap(),
                header(m, "__connect.errors.stage").unwrap(),
                header(m, "x-dead-letter-error-class").unwrap(),
            )
        })
        .collect();
    seen.sort();
    let want: Vec<(i64, String, String)> = expected
        .iter()
        .map(|(o, s, c)| (*o, s.to_string(), c.to_string()))
        .collect();
    assert_eq!(seen, want);
    for m in &letters {
        let offset: usize = header(m, "__connect.errors.offset")
            .unwrap()
            .parse()
            .unwrap();
        // The original record, unchanged.
        assert_eq!(
            m.payload(),
            Some(POISON[offset]),
            "value of offset {offset}"
        );
        assert_eq!(m.key(), Some(format!("k{offset}").as_bytes()));
        assert_eq!(
            header(m, "trace-id").as_deref(),
            Some(format!("t{offset}").as_str()),
            "original header kept"
        );
        assert_eq!(
            m.timestamp().to_millis(),
            Some(1_700_000_000_000 + offset as i64)
        );
        // Kafka Connect's context headers and Sluice's.
        assert_eq!(header(m, "__connect.errors.topic").as_deref(), Some("pay"));
        assert_eq!(
            header(m, "__connect.errors.partition").as_deref(),
            Some("0")
        );
        assert_eq!(
            header(m, "__connect.errors.connector.name").as_deref(),
            Some("pay-sink")
        );
        assert_eq!(header(m, "__connect.errors.task.id").as_deref(), Some("0"));
        let class_name = header(m, "__connect.errors.class.name").unwrap();
        assert!(
            class_name == "jdbc-sink"
                || class_name == "transform `chaos`"
                || class_name.ends_with("StringConverter"),
            "{class_name}"
        );
        assert!(
            header(m, "__connect.errors.exception.class.name")
                .unwrap()
                .starts_with("sluice.")
        );
        assert!(
            !header(m, "__connect.errors.exception.message")
                .unwrap()
                .is_empty()
        );
        assert!(
            !header(m, "__connect.errors.exception.stacktrace")
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            header(m, "x-dead-letter-origin-topic").as_deref(),
            Some("pay")
        );
        assert_eq!(header(m, "x-dead-letter-retry-count").as_deref(), Some("0"));
        let at = header(m, "x-dead-letter-failed-at").unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(&at).is_ok(),
            "failed-at is RFC 3339: {at}"
        );
    }
    // The good records were written, and the offsets moved past everything.
    let rows = fixtures::eventually(Duration::from_secs(60), "the good rows", || async {
        let rows =
            fixtures::sqlite_rows(&db, "SELECT order_id, customer FROM pay ORDER BY order_id")
                .await;
        (rows.len() == 2).then_some(rows)
    })
    .await;
    assert_eq!(
        rows,
        vec![
            vec!["1".to_string(), "ann".into()],
            vec!["7".to_string(), "bob".into()]
        ]
    );
    fixtures::eventually(
        Duration::from_secs(60),
        "offsets committed past the batch",
        || async {
            (crate::sink_failures::committed_offset(
                env.broker.bootstrap_servers(),
                "connect-pay-sink",
                "pay",
            ) == Some(7))
            .then_some(())
        },
    )
    .await;
    let status = env.worker.status("pay-sink").await.unwrap();
    assert_eq!(
        status.tasks[0].1.state,
        sluice_runtime::task::State::Running
    );
    assert_eq!(metric(&env, "sluice_dlq_records_total{"), 5);
    assert_eq!(
        metric(
            &env,
            r#"sluice_dlq_records_total{connector="pay-sink",error_class="TransformTrap",stage="TRANSFORMATION""#
        ),
        1
    );
    assert_eq!(metric(&env, "sluice_errors_total{"), 5);

    // inspect sees the same.
    let clients = env.worker.clients().clone();
    let report =
        tokio::task::spawn_blocking(move || sluice_runtime::dlq::inspect(&clients, "pay-dlq", 1))
            .await
            .unwrap()
            .unwrap();
    assert_eq!(report.total, 5);
    assert_eq!(report.by_stage.get("TASK_PUT"), Some(&2));
    assert_eq!(report.by_error_class.get("InvalidUtf8"), Some(&1));
    assert_eq!(report.by_origin_topic.get("pay"), Some(&5));
    assert_eq!(report.samples.len(), 5, "one sample per class");
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tolerance_none_fails_on_the_first_bad_record_and_commits_nothing_past_it() {
    let env = InProcess::start();
    env.broker.create_topic("pay", 1).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pay.db");
    sqlite_orders(&db, true);
    // A good record, then the NOT NULL violation.
    send(
        env.broker.bootstrap_servers(),
        "pay",
        &[POISON[0], POISON[4], POISON[6]],
    )
    .await;
    env.create(json!({"name": "pay-sink", "config": sink_config(&db, "none")}))
        .await;
    let trace = env.failed_trace("pay-sink").await;
    assert!(
        trace.contains("stage TASK_PUT")
            && trace.contains("pay-0@1")
            && trace.contains("ConstraintViolation"),
        "{trace}"
    );
    assert!(
        trace.to_lowercase().contains("not null"),
        "the database's reason is in the trace: {trace}"
    );
    let committed = crate::sink_failures::committed_offset(
        env.broker.bootstrap_servers(),
        "connect-pay-sink",
        "pay",
    );
    assert!(
        committed.is_none_or(|o| o <= 1),
        "committed {committed:?} passes the bad record"
    );
    assert!(
        fixtures::read_topic(env.broker.bootstrap_servers(), "pay-dlq").is_empty(),
        "nothing dead-lettered with tolerance none"
    );
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_source_record_is_dead_lettered_and_the_rest_flows() {
    let env = InProcess::start();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let big = format!("{{\"blob\": \"{}\"}}", "x".repeat(2 * 1024 * 1024));
    std::fs::write(&input, format!("{{\"n\": 1}}\n{big}\n{{\"n\": 3}}\n")).unwrap();
    env.create(json!({"name": "lines", "config": {
        "connector.class": "FileStreamSource", "file": input.display().to_string(), "topic": "lines",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "lines-dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
    }}))
    .await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let b = bootstrap.clone();
    let delivered = fixtures::eventually(Duration::from_secs(120), "the small lines", || {
        let b = b.clone();
        async move {
            let m = tokio::task::spawn_blocking(move || fixtures::read_topic(&b, "lines"))
                .await
                .ok()?;
            (m.len() >= 2).then_some(m)
        }
    })
    .await;
    let values: Vec<&[u8]> = delivered.iter().map(|m| m.payload().unwrap()).collect();
    assert_eq!(values, vec![&b"{\"n\": 1}"[..], &b"{\"n\": 3}"[..]]);
    let letters =
        tokio::task::spawn_blocking(move || fixtures::read_topic(&bootstrap, "lines-dlq"))
            .await
            .unwrap();
    assert_eq!(letters.len(), 1);
    let m = &letters[0];
    assert_eq!(
        header(m, "__connect.errors.stage").as_deref(),
        Some("KAFKA_PRODUCE")
    );
    assert_eq!(
        header(m, "x-dead-letter-error-class").as_deref(),
        Some("RecordTooLarge")
    );
    assert_eq!(
        header(m, "__connect.errors.partition").as_deref(),
        Some("-1"),
        "no Kafka position for a source record"
    );
    assert_eq!(
        header(m, "x-dead-letter-value-omitted-bytes"),
        Some(big.len().to_string()),
        "too large for the DLQ too: said so"
    );
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_outage_loses_nothing_and_dead_letters_nothing() {
    let Some(pg) = fixtures::PgInstance::start() else {
        return;
    };
    let env = InProcess::start();
    env.broker.create_topic("outage", 1).await.unwrap();
    let value = |i: u32| format!(r#"{{"id": {i}, "note": "n{i}"}}"#).into_bytes();
    let first: Vec<Vec<u8>> = (0..100).map(value).collect();
    let refs: Vec<(Option<&str>, &[u8])> = first.iter().map(|v| (None, v.as_slice())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), "outage", &refs).await;
    env.create(json!({"name": "outage-sink", "config": {
        "connector.class": "jdbc-sink", "topics": "outage", "connection.url": pg.url(),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "outage-dlq",
        "errors.infrastructure.retry.timeout": "-1", "errors.retry.delay.max.ms": "500",
    }}))
    .await;
    let pool = || async {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(2))
            .connect(&pg.url())
            .await
            .ok()
    };
    let count = || async {
        let p = pool().await?;
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM outage")
            .fetch_one(&p)
            .await
            .ok()?;
        p.close().await;
        Some(n)
    };
    fixtures::eventually(Duration::from_secs(180), "the first rows", || async {
        (count().await? == 100).then_some(())
    })
    .await;

    pg.down();
    let second: Vec<Vec<u8>> = (100..250).map(value).collect();
    let refs: Vec<(Option<&str>, &[u8])> = second.iter().map(|v| (None, v.as_slice())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), "outage", &refs).await;
    fixtures::eventually(
        Duration::from_secs(60),
        "retries against the down database",
        || async { (metric(&env, "sluice_retries_total{") >= 2).then_some(()) },
    )
    .await;
    let status = env.worker.status("outage-sink").await.unwrap();
    assert_eq!(
        status.tasks[0].1.state,
        sluice_runtime::task::State::Running,
        "retrying, not failed"
    );
    pg.up();
    fixtures::eventually(
        Duration::from_secs(180),
        "every row after the outage",
        || async { (count().await? == 250).then_some(()) },
    )
    .await;
    assert!(
        fixtures::read_topic(env.broker.bootstrap_servers(), "outage-dlq").is_empty(),
        "an outage is not bad data"
    );
    assert_eq!(metric(&env, "sluice_dlq_records_total{"), 0);
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn replay_after_a_fix_delivers_every_dead_letter_once() {
    let env = InProcess::start();
    env.broker.create_topic("pay", 1).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pay.db");
    sqlite_orders(&db, true);
    // Three records break the NOT NULL constraint (the "bug").
    let values: Vec<Vec<u8>> = (1..=9)
        .map(|i| {
            if i % 3 == 0 {
                format!(r#"{{"order_id": {i}, "amount": 1.0}}"#)
            } else {
                format!(r#"{{"order_id": {i}, "customer": "c{i}", "amount": 1.0}}"#)
            }
            .into_bytes()
        })
        .collect();
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    send(env.broker.bootstrap_servers(), "pay", &refs).await;
    env.create(json!({"name": "pay-sink", "config": sink_config(&db, "all")}))
        .await;
    fixtures::eventually(
        Duration::from_secs(180),
        "six rows and three dead letters",
        || async {
            let rows = fixtures::sqlite_rows(&db, "SELECT order_id FROM pay").await;
            let letters = fixtures::read_topic(env.broker.bootstrap_servers(), "pay-dlq");
            (rows.len() == 6 && letters.len() == 3).then_some(())
        },
    )
    .await;

    // The fix: the column may be empty after all.
    env.worker.stop_connector("pay-sink").await;
    sqlite_orders(&db, false);
    env.create(json!({"name": "pay-sink", "config": sink_config(&db, "all")}))
        .await;

    // Replay through the REST API.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let http = reqwest::Client::new();
    let dry: Value = http
        .post(format!("{base}/connectors/pay-sink/dlq/replay"))
        .json(&json!({"dry_run": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(dry["replayed"], 3, "{dry}");
    let report: Value = http
        .post(format!("{base}/connectors/pay-sink/dlq/replay"))
        .json(&json!({"error_class": "ConstraintViolation"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(report["replayed"], 3, "{report}");
    assert_eq!(report["by_target_topic"]["pay"], 3, "{report}");

    // Every dead-lettered record arrives, once. (The fix recreated the
    // table, so the good rows are gone from it; the sink's offsets are past
    // them and they are not read again.)
    let ids = fixtures::eventually(Duration::from_secs(180), "the replayed rows", || async {
        let rows = fixtures::sqlite_rows(&db, "SELECT order_id FROM pay ORDER BY order_id").await;
        (rows.len() == 3).then_some(rows)
    })
    .await;
    assert_eq!(
        ids,
        vec![vec!["3".to_string()], vec!["6".into()], vec!["9".into()]]
    );
    let topic = fixtures::read_topic(env.broker.bootstrap_servers(), "pay");
    assert_eq!(topic.len(), 12, "9 originals and 3 replayed");
    let replayed: Vec<_> = topic
        .iter()
        .filter(|m| header(m, "x-sluice-replay").is_some())
        .collect();
    assert_eq!(replayed.len(), 3);
    assert!(
        replayed
            .iter()
            .all(|m| header(m, "x-dead-letter-stage").is_none()),
        "dead-letter headers are removed"
    );
    assert!(
        replayed.iter().all(|m| header(m, "trace-id").is_some()),
        "original headers are kept"
    );

    // A second run, through the CLI, replays nothing more.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "dlq",
            "replay",
            "--topic",
            "pay-dlq",
            "--error-class",
            "ConstraintViolation",
            "--bootstrap-servers",
            env.broker.bootstrap_servers(),
            "--output",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(second["replayed"], 0, "{second}");
    assert_eq!(
        fixtures::read_topic(env.broker.bootstrap_servers(), "pay").len(),
        12,
        "nothing duplicated"
    );
    // inspect, through the CLI too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "dlq",
            "inspect",
            "--topic",
            "pay-dlq",
            "--bootstrap-servers",
            env.broker.bootstrap_servers(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && text.contains("3 record(s)")
            && text.contains("ConstraintViolation"),
        "{text}"
    );
    env.worker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retriable_record_is_retried_within_its_budget_then_dead_lettered() {
    let env = InProcess::start();
    env.broker.create_topic("pay", 1).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("pay.db");
    sqlite_orders(&db, false);
    send(
        env.broker.bootstrap_servers(),
        "pay",
        &[b"error:retriable", POISON[0]],
    )
    .await;
    let mut config = sink_config(&db, "all");
    config["errors.retry.timeout"] = json!("10000");
    config["errors.retry.max.attempts"] = json!("3");
    config["errors.retry.delay.max.ms"] = json!("200");
    env.create(json!({"name": "retry-sink", "config": config}))
        .await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let letters = fixtures::eventually(Duration::from_secs(180), "the dead letter", || {
        let b = bootstrap.clone();
        async move {
            let l = tokio::task::spawn_blocking(move || fixtures::read_topic(&b, "pay-dlq"))
                .await
                .ok()?;
            (!l.is_empty()).then_some(l)
        }
    })
    .await;
    assert_eq!(letters.len(), 1);
    assert_eq!(
        header(&letters[0], "x-dead-letter-error-class").as_deref(),
        Some("RetriableError")
    );
    assert_eq!(
        header(&letters[0], "x-dead-letter-retry-count").as_deref(),
        Some("2"),
        "3 attempts: 2 retries"
    );
    assert_eq!(
        metric(
            &env,
            r#"sluice_retries_total{connector="retry-sink",stage="TRANSFORMATION""#
        ),
        2
    );
    let rows = fixtures::eventually(Duration::from_secs(60), "the good row", || async {
        let rows = fixtures::sqlite_rows(&db, "SELECT order_id FROM pay").await;
        (!rows.is_empty()).then_some(rows)
    })
    .await;
    assert_eq!(rows, vec![vec!["1".to_string()]]);
    env.worker.shutdown().await;
}

/// Produces a record with one header whose key is `header_key`, bytes that
/// need not be UTF-8: Kafka's protocol allows it, no safe client API does,
/// so it goes through librdkafka's C API.
fn send_with_raw_header_key(bootstrap: &str, topic: &str, header_key: &[u8], value: &[u8]) {
    use rdkafka::bindings as rd;
    use rdkafka::producer::Producer;
    use std::ffi::{CString, c_void};
    let producer: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let topic = CString::new(topic).unwrap();
    let name = CString::new(header_key).unwrap();
    let vu = |vtype, u| rd::rd_kafka_vu_t { vtype, u };
    let vus = [
        vu(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_TOPIC,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                cstr: topic.as_ptr(),
            },
        ),
        vu(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_PARTITION,
            rd::rd_kafka_vu_s__bindgen_ty_1 { i32_: 0 },
        ),
        vu(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_VALUE,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                mem: rd::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_1 {
                    ptr: value.as_ptr() as *mut c_void,
                    size: value.len(),
                },
            },
        ),
        vu(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_HEADER,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                header: rd::rd_kafka_vu_s__bindgen_ty_1__bindgen_ty_2 {
                    name: name.as_ptr(),
                    val: b"v".as_ptr() as *const c_void,
                    size: 1,
                },
            },
        ),
        vu(
            rd::rd_kafka_vtype_t::RD_KAFKA_VTYPE_MSGFLAGS,
            rd::rd_kafka_vu_s__bindgen_ty_1 {
                i: rd::RD_KAFKA_MSG_F_COPY,
            },
        ),
    ];
    // SAFETY: every pointer outlives the call (the value is copied).
    let error =
        unsafe { rd::rd_kafka_produceva(producer.client().native_ptr(), vus.as_ptr(), vus.len()) };
    assert!(error.is_null(), "librdkafka refused the record");
    producer.flush(Duration::from_secs(10)).unwrap();
}

/// A header key that is not UTF-8 is the header converter's failure of
/// that one record: dead-lettered (its key made valid, the error naming
/// the bytes) under errors.tolerance=all, never a panic of the task.
#[tokio::test(flavor = "multi_thread")]
async fn a_header_key_that_is_not_utf8_is_a_converter_error_not_a_panic() {
    let env = InProcess::start();
    env.broker.create_topic("hdr", 1).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hdr.db");
    let bootstrap = env.broker.bootstrap_servers().to_string();
    send_with_raw_header_key(
        &bootstrap,
        "hdr",
        b"\xffbad",
        br#"{"order_id": 1, "customer": "ann"}"#,
    );
    send(
        &bootstrap,
        "hdr",
        &[br#"{"order_id": 2, "customer": "bob"}"#],
    )
    .await;
    env.create(json!({"name": "hdr-sink", "config": {
        "connector.class": "jdbc-sink", "topics": "hdr",
        "connection.url": format!("jdbc:sqlite:{}", db.display()),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id",
        "auto.create": "true",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "hdr-dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.deadletterqueue.topic.replication.factor": "1",
    }}))
    .await;
    let rows = fixtures::eventually(Duration::from_secs(60), "the good row", || async {
        let rows =
            fixtures::sqlite_rows(&db, "SELECT order_id, customer FROM hdr ORDER BY order_id")
                .await;
        (!rows.is_empty()).then_some(rows)
    })
    .await;
    assert_eq!(rows, vec![vec!["2".to_string(), "bob".into()]]);
    let letters = fixtures::eventually(Duration::from_secs(60), "the dead letter", || {
        let bootstrap = bootstrap.clone();
        async move {
            let letters =
                tokio::task::spawn_blocking(move || fixtures::read_topic(&bootstrap, "hdr-dlq"))
                    .await
                    .ok()?;
            (!letters.is_empty()).then_some(letters)
        }
    })
    .await;
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(
        header(letter, "__connect.errors.stage").as_deref(),
        Some("HEADER_CONVERTER")
    );
    assert_eq!(
        header(letter, "x-dead-letter-error-class").as_deref(),
        Some("InvalidHeaderKey")
    );
    let message = header(letter, "__connect.errors.exception.message").unwrap();
    assert!(message.contains("ff 62 61 64"), "{message}");
    assert!(
        header(letter, "\u{fffd}bad").is_some(),
        "the key is carried, made valid"
    );
    env.assert_task_running("hdr-sink").await;
    // A dead letter written by another producer with such a key: inspect
    // reads it too.
    send_with_raw_header_key(&bootstrap, "hdr-dlq", b"\xfeforeign", b"{}");
    let clients = env.worker.clients().clone();
    let report =
        tokio::task::spawn_blocking(move || sluice_runtime::dlq::inspect(&clients, "hdr-dlq", 1))
            .await
            .expect("inspect does not panic")
            .unwrap();
    assert_eq!(report.total, 2);
    env.worker.shutdown().await;
}

/// `errors.restart.policy=backoff`: a task that keeps failing (here its
/// database never answers) is restarted automatically,
/// `errors.restart.max.attempts` times in a row, then stays FAILED and says
/// so; each attempt is counted.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_task_is_restarted_automatically_up_to_its_limit() {
    let env = InProcess::start();
    env.broker.create_topic("restarts", 1).await.unwrap();
    let closed_port = fixtures::free_port();
    env.create(json!({"name": "restarts", "config": {
        "connector.class": "jdbc-sink", "topics": "restarts",
        "connection.url": format!("jdbc:postgresql://127.0.0.1:{closed_port}/none"),
        "errors.infrastructure.retry.timeout": "300",
        "errors.restart.policy": "backoff",
        "errors.restart.initial.delay.ms": "100",
        "errors.restart.max.delay.ms": "400",
        "errors.restart.max.attempts": "2",
    }}))
    .await;
    let restarts = r#"sluice_task_auto_restarts_total{connector="restarts",task="0"}"#;
    let trace = fixtures::eventually(Duration::from_secs(60), "no more restarts", || async {
        let s = env.worker.status("restarts").await?;
        let (_, t) = s.tasks.first()?;
        let trace = t.trace.clone()?;
        (t.state == sluice_runtime::task::State::Failed
            && trace.contains("No more automatic restarts"))
        .then_some(trace)
    })
    .await;
    assert!(trace.contains("2 in a row"), "{trace}");
    assert!(
        trace.contains("connect"),
        "the failure itself is kept: {trace}"
    );
    assert_eq!(metric(&env, restarts), 2);
    // No third attempt however long it waits.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(metric(&env, restarts), 2);
    env.worker.shutdown().await;
}

/// A sink whose database is down fails once its infrastructure retries are
/// spent; with `errors.restart.policy=backoff` it is restarted until the
/// database is back, and then writes everything, with no one calling
/// restart.
#[tokio::test(flavor = "multi_thread")]
async fn a_task_failed_by_an_outage_restarts_by_itself_when_the_database_is_back() {
    let Some(pg) = fixtures::PgInstance::start() else {
        return;
    };
    let env = InProcess::start();
    env.broker.create_topic("comeback", 1).await.unwrap();
    let values: Vec<Vec<u8>> = (0..20)
        .map(|i| format!(r#"{{"id": {i}}}"#).into_bytes())
        .collect();
    let refs: Vec<(Option<&str>, &[u8])> = values.iter().map(|v| (None, v.as_slice())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), "comeback", &refs).await;
    pg.down();
    env.create(json!({"name": "comeback", "config": {
        "connector.class": "jdbc-sink", "topics": "comeback", "connection.url": pg.url(),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
        "errors.infrastructure.retry.timeout": "500",
        "errors.restart.policy": "backoff",
        "errors.restart.initial.delay.ms": "200",
        "errors.restart.max.delay.ms": "1000",
    }}))
    .await;
    fixtures::eventually(Duration::from_secs(60), "automatic restarts", || async {
        (metric(
            &env,
            r#"sluice_task_auto_restarts_total{connector="comeback""#,
        ) >= 2)
            .then_some(())
    })
    .await;
    pg.up();
    let count = || async {
        let rows =
            fixtures::db_rows(&pg.url(), "SELECT CAST(count(*) AS TEXT) FROM comeback").await;
        rows[0][0].parse::<u64>().ok()
    };
    fixtures::eventually(Duration::from_secs(120), "every row", || async {
        if !fixtures::table_exists(&pg.url(), "comeback").await {
            return None;
        }
        (count().await? == 20).then_some(())
    })
    .await;
    env.assert_task_running("comeback").await;
    env.worker.shutdown().await;
}
