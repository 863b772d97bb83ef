//! The JDBC sink against a real PostgreSQL server (started by
//! `scripts/test.sh`, URL in SLUICE_TEST_POSTGRES_URL).

use std::time::Duration;

use serde_json::json;
use sqlx::Row;

use crate::fixtures::{self, InProcess};

/// The server's URL. Without one this fails, loudly, unless the run says
/// explicitly that PostgreSQL is unavailable (SLUICE_SKIP_POSTGRES=1), in
/// which case it prints that the check did not run.
pub(crate) fn postgres_url() -> Option<String> {
    match std::env::var("SLUICE_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("SLUICE_SKIP_POSTGRES").as_deref() == Ok("1") => {
            eprintln!(
                "\n*** POSTGRESQL TESTS DID NOT RUN: SLUICE_SKIP_POSTGRES=1 and no SLUICE_TEST_POSTGRES_URL ***\n"
            );
            None
        }
        Err(_) => panic!(
            "SLUICE_TEST_POSTGRES_URL is not set: run the tests through scripts/test.sh, which starts PostgreSQL, \
             or set SLUICE_SKIP_POSTGRES=1 to skip these checks knowingly"
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn upserts_into_postgres_with_casts_quoting_and_auto_create() {
    let Some(url) = postgres_url() else { return };
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .unwrap();
    let suffix = std::process::id();
    // A mixed-case table whose name is a keyword-ish word, with types that
    // need casts from JSON text and numbers.
    let table = format!("Order_{suffix}");
    sqlx::query(&format!(r#"DROP TABLE IF EXISTS "{table}""#))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(&format!(
        r#"CREATE TABLE "{table}" (order_id BIGINT PRIMARY KEY, "Customer" TEXT NOT NULL, amount NUMERIC(10,2),
           updated_at TIMESTAMPTZ, "select" BOOLEAN)"#
    ))
    .execute(&pool)
    .await
    .unwrap();
    let auto_table = format!("auto_{suffix}");
    sqlx::query(&format!(r#"DROP TABLE IF EXISTS "{auto_table}""#))
        .execute(&pool)
        .await
        .unwrap();

    let env = InProcess::start();
    env.broker.create_topic("pg-orders", 1).await.unwrap();
    env.broker.create_topic("pg-auto", 1).await.unwrap();
    let v = |id: u32, customer: &str, amount: f64, ts: &str| {
        json!({"order_id": id, "Customer": customer, "amount": amount, "updated_at": ts, "select": id.is_multiple_of(2)})
            .to_string()
            .into_bytes()
    };
    let records = [
        v(1, "ann", 10.25, "2026-01-01T00:00:00Z"),
        v(2, "bob", 20.5, "2026-01-01T00:00:01Z"),
        v(1, "ann", 11.75, "2026-01-01T00:00:02Z"),
    ];
    let refs: Vec<(Option<&str>, &[u8])> = records.iter().map(|r| (None, r.as_slice())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), "pg-orders", &refs).await;
    let auto = [br#"{"id": "a", "n": 1, "x": 0.5, "ok": true, "tags": ["t"]}"#.as_slice()];
    fixtures::produce(
        env.broker.bootstrap_servers(),
        "pg-auto",
        &[(None, auto[0])],
    )
    .await;

    env.create(json!({"name": "pg-sink", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "topics": "pg-orders",
        "connection.url": url.replacen("postgres://", "jdbc:postgresql://", 1),
        "table.name.format": table,
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id",
    }}))
    .await;
    env.create(json!({"name": "pg-auto-sink", "config": {
        "connector.class": "jdbc-sink", "topics": "pg-auto", "connection.url": url.clone(),
        "table.name.format": format!("auto_{suffix}"),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id", "auto.create": "true",
    }}))
    .await;

    let rows = fixtures::eventually(Duration::from_secs(180), "rows in PostgreSQL", || {
        let pool = pool.clone();
        let table = table.clone();
        async move {
            let rows = sqlx::query(&format!(
                r#"SELECT order_id, "Customer", amount::text, to_char(updated_at AT TIME ZONE 'UTC', 'HH24:MI:SS'), "select"
                   FROM "{table}" ORDER BY order_id"#
            ))
            .fetch_all(&pool)
            .await
            .ok()?;
            let rows: Vec<(i64, String, String, String, bool)> =
                rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect();
            (rows.len() == 2 && rows[0].2 == "11.75").then_some(rows)
        }
    })
    .await;
    assert_eq!(
        rows,
        vec![
            (
                1,
                "ann".to_string(),
                "11.75".to_string(),
                "00:00:02".to_string(),
                false
            ),
            (
                2,
                "bob".to_string(),
                "20.50".to_string(),
                "00:00:01".to_string(),
                true
            ),
        ]
    );

    let auto_row = fixtures::eventually(
        Duration::from_secs(180),
        "the auto-created table's row",
        || {
            let pool = pool.clone();
            let auto_table = auto_table.clone();
            async move {
                let r = sqlx::query(&format!(r#"SELECT id, n, x, ok, tags FROM "{auto_table}""#))
                    .fetch_one(&pool)
                    .await
                    .ok()?;
                Some((
                    r.get::<String, _>(0),
                    r.get::<i64, _>(1),
                    r.get::<f64, _>(2),
                    r.get::<bool, _>(3),
                    r.get::<String, _>(4),
                ))
            }
        },
    )
    .await;
    assert_eq!(
        auto_row,
        ("a".to_string(), 1, 0.5, true, r#"["t"]"#.to_string())
    );
    env.worker.shutdown().await;
    for t in [&table, &auto_table] {
        sqlx::query(&format!(r#"DROP TABLE IF EXISTS "{t}""#))
            .execute(&pool)
            .await
            .unwrap();
    }
}

/// A record too large for the table's index (PostgreSQL 54000, "index row
/// size exceeds btree maximum") is a data error of that record: under
/// errors.tolerance=all it is dead-lettered and the others are written,
/// rather than failing the task as a database error.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_over_a_database_limit_is_dead_lettered_not_fatal() {
    let Some(url) = postgres_url() else { return };
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await
        .unwrap();
    let table = format!("limits_{}", std::process::id());
    sqlx::query(&format!(r#"DROP TABLE IF EXISTS "{table}""#))
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query(&format!(
        r#"CREATE TABLE "{table}" (id BIGINT PRIMARY KEY, code TEXT UNIQUE)"#
    ))
    .execute(&pool)
    .await
    .unwrap();
    let env = InProcess::start();
    env.broker.create_topic(&table, 1).await.unwrap();
    // Hex of a pseudo-random sequence: too large for a btree entry even
    // compressed.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let huge: String = (0..6000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            format!("{:02x}", state as u8)
        })
        .collect();
    let records = [
        format!(r#"{{"id": 1, "code": "{huge}"}}"#),
        r#"{"id": 2, "code": "small"}"#.to_string(),
    ];
    let refs: Vec<(Option<&str>, &[u8])> = records.iter().map(|r| (None, r.as_bytes())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), &table, &refs).await;
    env.create(json!({"name": "pg-limits", "config": {
        "connector.class": "jdbc-sink", "topics": table,
        "connection.url": url,
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "pg-limits-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
    }}))
    .await;
    let rows = fixtures::eventually(Duration::from_secs(60), "the small row", || async {
        if let Some(s) = env.worker.status("pg-limits").await
            && let Some((_, t)) = s.tasks.first()
            && t.state == sluice_runtime::task::State::Failed
        {
            panic!("the task failed: {:?}", t.trace);
        }
        let rows: Vec<i64> = sqlx::query(&format!(r#"SELECT id FROM "{table}" ORDER BY id"#))
            .fetch_all(&pool)
            .await
            .ok()?
            .iter()
            .map(|r| r.get::<i64, _>(0))
            .collect();
        (!rows.is_empty()).then_some(rows)
    })
    .await;
    assert_eq!(rows, vec![2]);
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let letters = fixtures::eventually(Duration::from_secs(60), "the dead letter", || {
        let bootstrap = bootstrap.clone();
        async move {
            let letters = tokio::task::spawn_blocking(move || {
                fixtures::read_topic(&bootstrap, "pg-limits-dlq")
            })
            .await
            .ok()?;
            (!letters.is_empty()).then_some(letters)
        }
    })
    .await;
    assert_eq!(letters.len(), 1);
    env.assert_task_running("pg-limits").await;
    env.worker.shutdown().await;
}

/// Exactly-once into PostgreSQL when another owner of the partition has
/// committed past this task's position (what a task that lost its
/// assignment meets): the task's commit is fenced, it reads on from the
/// stored offset, and the records the other owner wrote are not written
/// again.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_exactly_once_sink_reads_on_from_the_stored_offset() {
    let Some(url) = postgres_url() else { return };
    let suffix = std::process::id();
    let (table, offsets, name) = (
        format!("fenced_{suffix}"),
        format!("fenced_offsets_{suffix}"),
        format!("pg-fenced-{suffix}"),
    );
    for t in [&table, &offsets] {
        fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{t}""#)).await;
    }
    let env = InProcess::start();
    env.broker.create_topic(&table, 1).await.unwrap();
    let produce = |from: i64, to: i64| {
        let records: Vec<String> = (from..to).map(|n| format!(r#"{{"n": {n}}}"#)).collect();
        let bootstrap = env.broker.bootstrap_servers().to_string();
        let table = table.clone();
        async move {
            let refs: Vec<(Option<&str>, &[u8])> =
                records.iter().map(|r| (None, r.as_bytes())).collect();
            fixtures::produce(&bootstrap, &table, &refs).await;
        }
    };
    produce(0, 10).await;
    env.create(json!({"name": name, "config": {
        "connector.class": "jdbc-sink", "topics": table,
        "connection.url": url,
        "insert.mode": "insert", "pk.mode": "none", "auto.create": "true",
        "offsets.table.name": offsets,
        "delivery.guarantee": "exactly-once",
    }}))
    .await;
    let stored = |url: String, offsets: String| async move {
        if !fixtures::table_exists(&url, &offsets).await {
            return None;
        }
        let rows = fixtures::db_rows(
            &url,
            &format!(r#"SELECT CAST("offset" AS TEXT) FROM "{offsets}""#),
        )
        .await;
        rows.first().map(|r| r[0].parse::<i64>().unwrap())
    };
    fixtures::eventually(Duration::from_secs(60), "offset 10 stored", || {
        let (url, offsets) = (url.clone(), offsets.clone());
        async move { (stored(url, offsets).await == Some(10)).then_some(()) }
    })
    .await;
    // Another owner of the partition wrote offsets 10..19 and committed.
    fixtures::db_exec(&url, &format!(r#"UPDATE "{offsets}" SET "offset" = 20"#)).await;
    produce(10, 30).await;
    fixtures::eventually(Duration::from_secs(60), "offset 30 stored", || {
        let (url, offsets) = (url.clone(), offsets.clone());
        async move { (stored(url, offsets).await == Some(30)).then_some(()) }
    })
    .await;
    let mut written: Vec<i64> =
        fixtures::db_rows(&url, &format!(r#"SELECT CAST(n AS TEXT) FROM "{table}""#))
            .await
            .iter()
            .map(|r| r[0].parse().unwrap())
            .collect();
    written.sort();
    let expected: Vec<i64> = (0..10).chain(20..30).collect();
    assert_eq!(written, expected, "rows 10..19 belong to the other owner");
    env.assert_task_running(&name).await;
    env.worker.shutdown().await;
}

/// Records the database refuses for themselves, not for its state: a
/// field named like a system column (`ctid`, 42701 from auto.evolve's
/// ALTER TABLE) and a row a trigger rejects (RAISE EXCEPTION, P0001).
/// Under errors.tolerance=all both are dead-lettered and the others
/// written; the task keeps running.
#[tokio::test(flavor = "multi_thread")]
async fn records_the_database_refuses_are_dead_lettered() {
    let Some(url) = postgres_url() else { return };
    let table = format!("refused_{}", std::process::id());
    for sql in [
        format!(r#"DROP TABLE IF EXISTS "{table}""#),
        format!(r#"CREATE TABLE "{table}" (id BIGINT PRIMARY KEY, v TEXT)"#),
        format!(
            r#"CREATE OR REPLACE FUNCTION "{table}_check"() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN IF NEW.v = 'bad' THEN RAISE EXCEPTION 'v must not be bad'; END IF; RETURN NEW; END $$"#
        ),
        format!(
            r#"CREATE TRIGGER "{table}_check" BEFORE INSERT OR UPDATE ON "{table}"
               FOR EACH ROW EXECUTE FUNCTION "{table}_check"()"#
        ),
    ] {
        fixtures::db_exec(&url, &sql).await;
    }
    let env = InProcess::start();
    env.broker.create_topic(&table, 1).await.unwrap();
    let records = [
        r#"{"id": 1, "v": "a"}"#,
        r#"{"id": 2, "ctid": "x"}"#,
        r#"{"id": 3, "v": "bad"}"#,
        r#"{"id": 4, "v": "d"}"#,
    ];
    let refs: Vec<(Option<&str>, &[u8])> = records.iter().map(|r| (None, r.as_bytes())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), &table, &refs).await;
    let dlq = format!("{table}-dlq");
    env.create(json!({"name": "pg-refused", "config": {
        "connector.class": "jdbc-sink", "topics": table,
        "connection.url": url,
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "auto.evolve": "true",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
    }}))
    .await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let letters = fixtures::eventually(Duration::from_secs(60), "two dead letters", || {
        let (bootstrap, dlq) = (bootstrap.clone(), dlq.clone());
        let env = &env;
        async move {
            if let Some(s) = env.worker.status("pg-refused").await
                && let Some((_, t)) = s.tasks.first()
                && t.state == sluice_runtime::task::State::Failed
            {
                panic!("the task failed: {:?}", t.trace);
            }
            let letters =
                tokio::task::spawn_blocking(move || fixtures::read_topic(&bootstrap, &dlq))
                    .await
                    .ok()?;
            (letters.len() >= 2).then_some(letters)
        }
    })
    .await;
    let mut refused: Vec<String> = letters
        .iter()
        .map(|m| {
            use rdkafka::Message;
            String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned()
        })
        .collect();
    refused.sort();
    assert_eq!(refused, vec![records[1], records[2]]);
    let written = vec![vec!["1".to_string()], vec!["4".to_string()]];
    fixtures::eventually(Duration::from_secs(60), "rows 1 and 4", || async {
        let rows = fixtures::db_rows(
            &url,
            &format!(r#"SELECT CAST(id AS TEXT) FROM "{table}" ORDER BY id"#),
        )
        .await;
        (rows == written).then_some(())
    })
    .await;
    env.assert_task_running("pg-refused").await;
    env.worker.shutdown().await;
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
}

/// The sink reads and transforms its next batch while one is written.
/// With the table locked by another transaction, the first batch's upsert
/// waits for the lock, and meanwhile the records after it are consumed;
/// once the lock goes, every record is written once, exactly once, with
/// the offsets stored.
#[tokio::test(flavor = "multi_thread")]
async fn the_sink_reads_its_next_batch_while_one_is_written() {
    use sqlx::Connection;

    let Some(url) = postgres_url() else { return };
    let suffix = std::process::id();
    let (table, offsets, name) = (
        format!("ahead_{suffix}"),
        format!("ahead_offsets_{suffix}"),
        format!("pg-ahead-{suffix}"),
    );
    for t in [&table, &offsets] {
        fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{t}""#)).await;
    }
    fixtures::db_exec(
        &url,
        &format!(r#"CREATE TABLE "{table}" (n BIGINT PRIMARY KEY, tag TEXT)"#),
    )
    .await;
    let env = InProcess::start();
    env.broker.create_topic(&table, 1).await.unwrap();
    let records: Vec<String> = (0..8)
        .map(|n| format!(r#"{{"n": {n}, "tag": "t{n}"}}"#))
        .collect();
    let refs: Vec<(Option<&str>, &[u8])> = records.iter().map(|r| (None, r.as_bytes())).collect();
    fixtures::produce(env.broker.bootstrap_servers(), &table, &refs).await;

    let mut locker = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    sqlx::query(&format!(
        r#"LOCK TABLE "{table}" IN SHARE ROW EXCLUSIVE MODE"#
    ))
    .execute(&mut locker)
    .await
    .unwrap();
    env.create(json!({"name": name, "config": {
        "connector.class": "jdbc-sink", "topics": table,
        "connection.url": url,
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "n",
        "offsets.table.name": offsets,
        "delivery.guarantee": "exactly-once",
        // Batches of 5 then 3, however the records arrive: each is its own
        // message set, one fetch each, and the embedded broker holds a
        // fetch for the whole fetch.wait.max.ms.
        "batch.max.records": "5",
        "batch.linger.ms": "2000",
        "consumer.override.fetch.wait.max.ms": "5",
    }}))
    .await;
    fixtures::eventually(
        Duration::from_secs(60),
        "the first batch's upsert waiting for the lock",
        || {
            let url = url.clone();
            let table = table.clone();
            async move {
                let waiting = fixtures::db_rows(
                    &url,
                    &format!(
                        "SELECT CAST(count(*) AS TEXT) FROM pg_stat_activity \
                         WHERE wait_event_type = 'Lock' AND query LIKE '%{table}%'"
                    ),
                )
                .await;
                (waiting[0][0] != "0").then_some(())
            }
        },
    )
    .await;
    let consumed = || {
        env.worker
            .metrics()
            .render()
            .lines()
            .filter(|l| l.starts_with("sluice_records_total{"))
            .filter(|l| l.contains(&format!(r#"connector="{name}""#)))
            .filter(|l| l.contains(r#"stage="consume""#))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while consumed() != 8 {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after 30s waiting for all 8 records consumed while the first batch of 5 waits for the lock: {} consumed; metrics:\n{}",
            consumed(),
            env.worker
                .metrics()
                .render()
                .lines()
                .filter(|l| l.contains(&name) && !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let written = fixtures::db_rows(
        &url,
        &format!(r#"SELECT CAST(count(*) AS TEXT) FROM "{table}""#),
    )
    .await;
    assert_eq!(
        written[0][0], "0",
        "nothing is written while the lock is held"
    );

    sqlx::query("COMMIT").execute(&mut locker).await.unwrap();
    fixtures::eventually(Duration::from_secs(60), "offset 8 stored", || {
        let (url, offsets) = (url.clone(), offsets.clone());
        async move {
            if !fixtures::table_exists(&url, &offsets).await {
                return None;
            }
            let rows = fixtures::db_rows(
                &url,
                &format!(r#"SELECT CAST("offset" AS TEXT) FROM "{offsets}""#),
            )
            .await;
            (rows.first().map(|r| r[0].as_str()) == Some("8")).then_some(())
        }
    })
    .await;
    let rows = fixtures::db_rows(
        &url,
        &format!(r#"SELECT CAST(n AS TEXT), tag FROM "{table}" ORDER BY n"#),
    )
    .await;
    let expected: Vec<Vec<String>> = (0..8)
        .map(|n| vec![n.to_string(), format!("t{n}")])
        .collect();
    assert_eq!(rows, expected);
    assert_eq!(consumed(), 8, "nothing was read twice");
    env.assert_task_running(&name).await;
    env.worker.shutdown().await;
}
