//! The change data capture demo (`examples/cdc/`, its configs as shipped)
//! on a real broker: PostgreSQL's changes through `postgres-cdc`
//! (exactly-once: events and offsets in one Kafka transaction), a WASM
//! transform masking e-mails, into a second PostgreSQL server and SQLite,
//! while an OLTP-like workload runs (inserts, updates, deletes,
//! transactions over several tables, a truncate) and the worker is
//! SIGKILLed again and again. At the end each replica equals the source
//! row for row (e-mails masked), and the committed CDC topics hold no
//! event twice.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use rdkafka::Message;
use serde_json::{Value, json};

use super::{broker, read_committed, unique, write_connector, write_worker};
use crate::fixtures::{self, KillSchedule, SluiceProcess, eventually};
use crate::postgres::postgres_url;

const TABLES: [&str; 3] = ["customers", "orders", "order_lines"];

/// A shipped connector config, as JSON.
fn example(file: &str) -> Value {
    let path = fixtures::repo_root().join("examples/cdc").join(file);
    serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Each table's rows in one comparable form: text, ordered by key, the
/// source's e-mails masked as the transform masks them.
async fn snapshot(url: &str, source: bool) -> Vec<Vec<Vec<String>>> {
    let sqlite = url.starts_with("sqlite:");
    let email = if source {
        "CASE WHEN email IS NULL THEN NULL ELSE '***@' || split_part(email, '@', 2) END"
    } else {
        "email"
    };
    let money = |c: &str| {
        if sqlite {
            format!("printf('%.2f', {c})")
        } else {
            format!("{c}::numeric(12,2)::text")
        }
    };
    let text = |c: &str| {
        if sqlite {
            format!("CAST({c} AS TEXT)")
        } else {
            format!("{c}::text")
        }
    };
    let queries = [
        format!(
            "SELECT {}, name, {email}, {} FROM customers ORDER BY customers.id",
            text("id"),
            money("balance")
        ),
        format!(
            "SELECT {}, {}, status, {} FROM orders ORDER BY orders.id",
            text("id"),
            text("customer_id"),
            money("total")
        ),
        format!(
            "SELECT {}, {}, sku, {} FROM order_lines ORDER BY order_lines.order_id, order_lines.line",
            text("order_id"),
            text("line"),
            text("qty")
        ),
    ];
    let mut out = Vec::new();
    for q in queries {
        out.push(fixtures::db_rows(url, &q).await);
    }
    out
}

/// The workload: `rounds` transactions of an order system, one truncate.
async fn workload(url: String, rounds: u64, seed: u64) {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let mut state = seed | 1;
    let mut next = |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n.max(1)
    };
    for round in 0..rounds {
        let customer = 1 + next(round / 5 + 2);
        let sql = match round % 6 {
            0 => format!(
                "INSERT INTO customers (name, email, balance) VALUES ('c{round}', 'c{round}@d{}.example', {}.{:02})",
                round % 3,
                next(500),
                next(100)
            ),
            1 | 2 => {
                let lines: Vec<String> = (1..=1 + next(3))
                    .map(|l| {
                        format!(
                            "(currval('orders_id_seq'), {l}, 'sku{}', {})",
                            next(50),
                            1 + next(9)
                        )
                    })
                    .collect();
                format!(
                    "BEGIN;
                     INSERT INTO orders (customer_id, status, total) VALUES ({customer}, 'new', {}.{:02});
                     INSERT INTO order_lines VALUES {};
                     UPDATE customers SET balance = balance + 1 WHERE id = {customer};
                     COMMIT;",
                    next(300),
                    next(100),
                    lines.join(", ")
                )
            }
            3 => format!(
                "UPDATE customers SET email = 'n{round}@d{}.example', balance = balance + 0.25 WHERE id = {customer}",
                round % 4
            ),
            4 => {
                let order = 1 + next(round / 3 + 1);
                format!(
                    "BEGIN;
                     DELETE FROM order_lines WHERE order_id = {order};
                     DELETE FROM orders WHERE id = {order};
                     COMMIT;"
                )
            }
            _ => format!(
                "UPDATE orders SET status = 'shipped' WHERE id = {}",
                1 + next(round / 3 + 1)
            ),
        };
        let sql = if round == rounds / 2 {
            "TRUNCATE order_lines".to_string()
        } else {
            sql
        };
        sqlx::raw_sql(&sql)
            .execute(&pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cdc_demo_replicates_exactly_once_while_the_worker_is_killed() {
    let Some(base) = postgres_url() else { return };
    let target_base = std::env::var("SLUICE_TEST_POSTGRES_TARGET_URL").unwrap_or_else(|_| {
        panic!("SLUICE_TEST_POSTGRES_TARGET_URL is not set: scripts/test.sh starts the second PostgreSQL server")
    });
    let bootstrap = broker().bootstrap.clone();
    let slot = format!("demo_{}", std::process::id());
    let source_url = fixtures::fresh_pg_database(&base, "cdc_demo_src").await;
    let replica_url = fixtures::fresh_pg_database(&target_base, "cdc_demo_dst").await;
    fixtures::pg_script(
        &source_url,
        &std::fs::read_to_string(fixtures::repo_root().join("examples/cdc/schema.sql")).unwrap(),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let sqlite_path = dir.path().join("replica.db");
    let sqlite_url = format!("sqlite:{}", sqlite_path.display());
    let prefix = unique("shop").replace('-', "_");
    let mask = fixtures::build_guest("examples/cdc/mask-email", "sluice_mask_email.wasm");

    // The shipped configs, pointed at this run's databases and topics.
    let mut source = example("source.json")["config"].clone();
    let (user_host, db) = source_url
        .strip_prefix("postgres://")
        .unwrap()
        .rsplit_once('/')
        .unwrap();
    let (user, hostport) = user_host.split_once('@').unwrap();
    let (host, port) = hostport.split_once(':').unwrap();
    for (k, v) in [
        ("database.hostname", host),
        ("database.port", port),
        ("database.user", user),
        ("database.dbname", db),
        ("topic.prefix", &prefix),
        ("slot.name", &slot),
        ("publication.name", &slot),
        ("heartbeat.interval.ms", "1000"),
        ("status.update.interval.ms", "1000"),
    ] {
        source[k] = json!(v);
    }
    let sink = |file: &str, url: &str| {
        let mut c = example(file)["config"].clone();
        c["connection.url"] = json!(url);
        c["topics.regex"] = json!(format!("{}\\.public\\..*", prefix));
        c["transforms.mask.module"] = json!(mask.display().to_string());
        c["consumer.override.session.timeout.ms"] = json!("6000");
        c["consumer.override.heartbeat.interval.ms"] = json!("500");
        c["errors.infrastructure.retry.timeout"] = json!("-1");
        c
    };
    let worker = write_worker(dir.path(), &bootstrap, "worker", json!({}));
    let files = [
        write_connector(dir.path(), &unique("cdc-src"), source),
        write_connector(
            dir.path(),
            &unique("cdc-pg"),
            sink("replica-postgres.json", &replica_url),
        ),
        write_connector(
            dir.path(),
            &unique("cdc-lite"),
            sink("replica-sqlite.json", &sqlite_url),
        ),
    ];
    let args: Vec<&Path> = std::iter::once(worker.as_path())
        .chain(files.iter().map(|f| f.as_path()))
        .collect();

    let in_step = || async {
        let expected = snapshot(&source_url, true).await;
        let pg_ok = snapshot(&replica_url, false).await == expected;
        let lite_tables = if sqlite_path.exists() {
            fixtures::db_rows(
                &sqlite_url,
                "SELECT CAST(COUNT(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name IN ('customers', 'orders', 'order_lines')",
            )
            .await[0][0]
                .clone()
        } else {
            String::new()
        };
        let lite_ok = lite_tables == "3" && snapshot(&sqlite_url, false).await == expected;
        (pg_ok, lite_ok)
    };
    let tables_exist = || async {
        for t in TABLES {
            if !fixtures::table_exists(&replica_url, t).await {
                return false;
            }
        }
        true
    };

    // The snapshot lands before the first kill (a snapshot cut short
    // starts again, by design).
    let mut sluice = SluiceProcess::start(dir.path(), &args);
    eventually(
        Duration::from_secs(180),
        "the snapshot replicated",
        || async { (tables_exist().await && in_step().await == (true, true)).then_some(()) },
    )
    .await;

    let mut schedule = KillSchedule::from_env();
    let rounds = 600;
    let load = tokio::spawn(workload(source_url.clone(), rounds, schedule.seed));
    let started = Instant::now();
    let mut kills = 0;
    while !load.is_finished() && started.elapsed() < Duration::from_secs(240) {
        tokio::time::sleep(Duration::from_millis(schedule.next_ms(1500, 4000))).await;
        sluice.child.kill().unwrap();
        sluice.child.wait().unwrap();
        kills += 1;
        eprintln!("cdc demo: kill {kills} after {:?}", started.elapsed());
        sluice = SluiceProcess::start(dir.path(), &args);
    }
    load.await.unwrap();
    assert!(
        kills >= 2,
        "only {kills} kill(s) landed during the workload: it proved little"
    );

    let deadline = Instant::now() + Duration::from_secs(300);
    while in_step().await != (true, true) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    if in_step().await != (true, true) {
        let log = std::fs::read_to_string(&sluice.log).unwrap_or_default();
        let problems: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .collect();
        eprintln!(
            "cdc demo: the replicas did not catch up (seed {}); the worker's warnings and errors:\n{}",
            schedule.seed,
            problems[problems.len().saturating_sub(40)..].join("\n")
        );
    }
    let expected = snapshot(&source_url, true).await;
    assert!(
        expected[1].len() > 20,
        "the workload left too few orders: {}",
        expected[1].len()
    );
    assert_eq!(snapshot(&replica_url, false).await, expected);
    assert_eq!(snapshot(&sqlite_url, false).await, expected);

    // What read_committed consumers see: every change once. Snapshot
    // events share the snapshot's LSN, so they are told apart by key.
    for table in TABLES {
        let topic = format!("{prefix}.public.{table}");
        let mut seen = HashSet::new();
        let mut events = 0;
        for m in read_committed(&bootstrap, &topic) {
            let Some(value) = m.payload() else { continue };
            let value: Value = serde_json::from_slice(value).unwrap();
            let payload = &value["payload"];
            let key = m.key().map(|k| String::from_utf8_lossy(k).into_owned());
            let id = match payload["op"].as_str().unwrap() {
                "r" => ("r".to_string(), key.clone()),
                _ => (payload["source"]["lsn"].to_string(), key.clone()),
            };
            assert!(
                seen.insert(id.clone()),
                "{topic}: the event {id:?} is in the topic twice (seed {})",
                schedule.seed
            );
            events += 1;
        }
        assert!(events > 0, "{topic} is empty");
    }
    sluice.child.kill().unwrap();
    sluice.child.wait().unwrap();
    fixtures::pg_script(
        &base,
        &format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}' AND NOT active"
        ),
    )
    .await;
}
