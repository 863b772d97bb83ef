//! `postgres-cdc` against a real PostgreSQL server with wal_level=logical
//! (`scripts/postgres.sh`): snapshot, stream, Debezium's envelope, restarts
//! that repeat and lose nothing, and the faults that must fail loudly.

use std::time::Duration;

use rdkafka::Message;
use serde_json::{Value, json};

use crate::fixtures::{self, InProcess, eventually};
use crate::postgres::postgres_url;

/// Drops a slot left by an earlier run of the same test.
async fn drop_slot_if_any(base: &str, slot: &str) {
    fixtures::pg_script(
        base,
        &format!(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}' AND NOT active"
        ),
    )
    .await;
}

/// The slot's row, if it exists: the PostgreSQL process holding it, if any.
async fn slot_holders(base: &str, slot: &str) -> Vec<Vec<String>> {
    fixtures::db_rows(
        base,
        &format!("SELECT active_pid::text FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    )
    .await
}

/// Drops a slot a stopped task used. The server releases the slot when it
/// notices the replication connection closed, a moment after the task has
/// stopped; dropping only an inactive slot, once, could drop nothing.
async fn drop_slot_once_released(base: &str, slot: &str) {
    eventually(
        Duration::from_secs(30),
        "the stopped task's replication slot to be released and dropped",
        || async move {
            drop_slot_if_any(base, slot).await;
            slot_holders(base, slot).await.is_empty().then_some(())
        },
    )
    .await;
}

fn connector(name: &str, url: &str, slot: &str, extra: Value) -> Value {
    let rest = url.strip_prefix("postgres://").expect("postgres URL");
    let (user, rest) = rest.split_once('@').expect("user@host");
    let (hostport, db) = rest.split_once('/').expect("host/db");
    let (host, port) = hostport.split_once(':').expect("host:port");
    let mut config = json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": host,
        "database.port": port,
        "database.user": user,
        "database.dbname": db,
        "database.sslmode": "disable",
        "topic.prefix": "shop",
        "slot.name": slot,
        "publication.name": format!("{slot}_pub"),
        "table.include.list": "public.customers,public.orders",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "poll.interval.ms": "100",
        "status.update.interval.ms": "500",
    });
    for (k, v) in extra.as_object().expect("an object") {
        config[k] = v.clone();
    }
    json!({"name": name, "config": config})
}

/// The events of a topic (tombstones as `Value::Null`), once it holds `n`.
async fn events(env: &InProcess, topic: &str, n: usize) -> Vec<(Value, Value)> {
    fixtures::topic_records(env.broker.bootstrap_servers(), topic, n, topic)
        .await
        .iter()
        .map(|m| {
            let key = m
                .key()
                .map(|k| serde_json::from_slice::<Value>(k).unwrap()["payload"].clone())
                .unwrap_or(Value::Null);
            let value = m
                .payload()
                .map(|v| serde_json::from_slice::<Value>(v).unwrap())
                .unwrap_or(Value::Null);
            (key, value)
        })
        .collect()
}

fn payload(v: &Value) -> &Value {
    &v["payload"]
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_cdc_snapshots_then_streams_debezium_events() {
    let Some(base) = postgres_url() else { return };
    let slot = "sluice_cdc_stream";
    drop_slot_if_any(&base, slot).await;
    let url = fixtures::fresh_pg_database(&base, "cdc_stream").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, balance numeric(10,2),
           joined timestamptz, tags text[]);
         CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, note text);
         ALTER TABLE orders REPLICA IDENTITY FULL;
         CREATE TABLE audit (id int PRIMARY KEY);
         INSERT INTO customers (name, balance, joined, tags) VALUES
           ('ann', 10.50, '2026-01-02 03:04:05.123456+00', '{a,b}'),
           ('bob', -0.05, NULL, NULL);
         INSERT INTO orders VALUES (100, 1, 'first'), (101, 2, NULL);
         INSERT INTO audit VALUES (1);",
    )
    .await;

    let env = InProcess::start();
    env.create(connector("cdc", &url, slot, json!({}))).await;

    // The snapshot: every row as a read, in one consistent view.
    let customers = events(&env, "shop.public.customers", 2).await;
    let orders = events(&env, "shop.public.orders", 2).await;
    let ann = &customers[0].1;
    assert_eq!(customers[0].0, json!({"id": 1}));
    assert_eq!(payload(ann)["op"], "r");
    assert_eq!(payload(ann)["before"], Value::Null);
    assert_eq!(
        payload(ann)["after"],
        json!({"id": 1, "name": "ann", "balance": "BBo=", "joined": "2026-01-02T03:04:05.123456Z", "tags": ["a", "b"]})
    );
    let source = &payload(ann)["source"];
    assert_eq!(source["connector"], "postgresql");
    assert_eq!(source["name"], "shop");
    assert_eq!(source["db"], "cdc_stream");
    assert_eq!(source["schema"], "public");
    assert_eq!(source["table"], "customers");
    assert_eq!(source["snapshot"], "first");
    assert!(source["lsn"].as_i64().unwrap() > 0);
    // The schema is Debezium's: named envelope, row and source schemas,
    // the decimal as Kafka Connect's Decimal with its precision.
    let schema = &ann["schema"];
    assert_eq!(schema["name"], "shop.public.customers.Envelope");
    let after_schema = &schema["fields"][1];
    assert_eq!(after_schema["name"], "shop.public.customers.Value");
    assert_eq!(
        after_schema["fields"][2],
        json!({"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal",
               "version": 1, "parameters": {"scale": "2", "connect.decimal.precision": "10"}, "field": "balance"})
    );
    assert_eq!(
        schema["fields"][2]["name"],
        "io.debezium.connector.postgresql.Source"
    );
    let last_snapshot = payload(&orders[1].1)["source"]["snapshot"].clone();
    assert!(
        ["last", "last_in_data_collection"].contains(&last_snapshot.as_str().unwrap()),
        "{last_snapshot}"
    );
    // audit is not captured.
    assert!(fixtures::read_topic(env.broker.bootstrap_servers(), "shop.public.audit").is_empty());

    // The stream: an insert, an update, a delete (with its tombstone), a
    // transaction over both tables, a column added.
    fixtures::pg_script(
        &url,
        "INSERT INTO customers (name, balance) VALUES ('cy', 1.00);
         UPDATE customers SET balance = 11.00 WHERE id = 1;
         DELETE FROM orders WHERE id = 101;
         BEGIN;
           INSERT INTO orders VALUES (102, 3, 'two tables');
           UPDATE customers SET name = 'cy2' WHERE id = 3;
         COMMIT;
         ALTER TABLE customers ADD COLUMN email text;
         INSERT INTO customers (name, email) VALUES ('dee', 'd@x');
         INSERT INTO audit VALUES (2);",
    )
    .await;
    let customers = events(&env, "shop.public.customers", 6).await;
    let ops: Vec<&str> = customers
        .iter()
        .map(|(_, v)| payload(v)["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["r", "r", "c", "u", "u", "c"]);
    let update = payload(&customers[3].1);
    assert_eq!(update["before"], Value::Null, "REPLICA IDENTITY DEFAULT");
    assert_eq!(update["after"]["balance"], "BEw=");
    assert_eq!(update["source"]["snapshot"], "false");
    let dee = &customers[5].1;
    assert_eq!(payload(dee)["after"]["email"], "d@x");
    assert_eq!(
        dee["schema"]["fields"][1]["fields"][5]["field"], "email",
        "the added column is in the later event's schema"
    );
    // LSNs grow through the stream.
    let lsns: Vec<i64> = customers[2..]
        .iter()
        .map(|(_, v)| payload(v)["source"]["lsn"].as_i64().unwrap())
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "{lsns:?}");

    let orders = events(&env, "shop.public.orders", 5).await;
    let delete = payload(&orders[2].1);
    assert_eq!(orders[2].0, json!({"id": 101}));
    assert_eq!(delete["op"], "d");
    assert_eq!(
        delete["before"],
        json!({"id": 101, "customer_id": 2, "note": null}),
        "REPLICA IDENTITY FULL: the whole old row"
    );
    assert_eq!(delete["after"], Value::Null);
    assert_eq!(
        orders[3],
        (json!({"id": 101}), Value::Null),
        "the tombstone"
    );
    let in_txn = payload(&orders[4].1);
    assert_eq!(in_txn["op"], "c");
    assert_eq!(
        in_txn["source"]["txId"],
        payload(&customers[4].1)["source"]["txId"],
        "one transaction over two tables"
    );

    // A task restart resumes after the last event: nothing again, nothing
    // missed.
    env.worker.restart_task("cdc", 0).await.unwrap();
    fixtures::pg_script(&url, "INSERT INTO orders VALUES (103, 1, 'after restart');").await;
    let orders = events(&env, "shop.public.orders", 6).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = fixtures::read_topic(env.broker.bootstrap_servers(), "shop.public.orders");
    assert_eq!(all.len(), 6, "no event repeated after the restart");
    assert_eq!(payload(&orders[5].1)["after"]["id"], 103);

    // The slot follows what Kafka holds.
    let last_lsn = lsns[lsns.len() - 1];
    let confirmed = eventually(Duration::from_secs(30), "the slot to advance", || {
        let base = base.clone();
        async move {
            let rows = fixtures::db_rows(
                &base,
                &format!(
                    "SELECT (confirmed_flush_lsn - '0/0')::text FROM pg_replication_slots WHERE slot_name = '{slot}'"
                ),
            )
            .await;
            let confirmed: i64 = rows.first()?.first()?.parse().ok()?;
            (confirmed >= last_lsn).then_some(confirmed)
        }
    })
    .await;
    assert!(confirmed > 0);
    env.worker.delete_connector("cdc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_cdc_refuses_a_server_without_logical_decoding_and_a_dropped_slot() {
    let Some(base) = postgres_url() else { return };
    let slot = "sluice_cdc_faults";
    drop_slot_if_any(&base, slot).await;
    let url = fixtures::fresh_pg_database(&base, "cdc_faults").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE customers (id int PRIMARY KEY, name text);
         INSERT INTO customers VALUES (1, 'ann');",
    )
    .await;
    let env = InProcess::start();
    // A publication that lacks a captured table, and may not be changed.
    fixtures::pg_script(
        &url,
        &format!("CREATE PUBLICATION {slot}_pub FOR TABLE customers"),
    )
    .await;
    fixtures::pg_script(&url, "CREATE TABLE orders (id int PRIMARY KEY)").await;
    env.create(connector(
        "faults",
        &url,
        slot,
        json!({"publication.autocreate.mode": "disabled"}),
    ))
    .await;
    let trace = env.failed_trace("faults").await;
    assert!(trace.contains("does not publish public.orders"), "{trace}");
    env.worker.delete_connector("faults").await;

    // Streaming, then the slot is dropped under it: the task fails and says
    // what is lost, rather than starting over silently.
    fixtures::pg_script(
        &url,
        &format!("ALTER PUBLICATION {slot}_pub ADD TABLE orders"),
    )
    .await;
    // Exactly-once: each transaction stores the offsets with the events, so
    // the task needs no clean stop to have stored the streamed position.
    // (At-least-once stores it at the stop; a stop that overran its
    // graceful timeout would store nothing, and the task would start over
    // with a new snapshot rather than fail.)
    env.create(connector(
        "faults2",
        &url,
        slot,
        json!({"delivery.guarantee": "exactly-once"}),
    ))
    .await;
    events(&env, "shop.public.customers", 1).await;
    fixtures::pg_script(&url, "INSERT INTO customers VALUES (2, 'bob')").await;
    events(&env, "shop.public.customers", 2).await;
    eventually(
        Duration::from_secs(60),
        "the streamed event's position among the stored offsets",
        || async {
            let offsets = env.herder.offsets("faults2").await.ok()??;
            offsets
                .iter()
                .any(|o| o["offset"]["lsn"].is_number() && o["offset"]["snapshot"].is_null())
                .then_some(())
        },
    )
    .await;
    env.worker.stop("faults2").await.unwrap();
    drop_slot_once_released(&base, slot).await;
    env.worker.resume("faults2").await.unwrap();
    let trace = env.failed_trace("faults2").await;
    assert!(
        trace.contains(&format!("replication slot `{slot}` no longer exists"))
            && trace.contains("are lost"),
        "{trace}"
    );
    env.worker.delete_connector("faults2").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_cdc_drops_its_slot_on_stop_when_asked() {
    let Some(base) = postgres_url() else { return };
    let slot = "sluice_cdc_drop_on_stop";
    drop_slot_if_any(&base, slot).await;
    let url = fixtures::fresh_pg_database(&base, "cdc_drop_on_stop").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE customers (id int PRIMARY KEY, name text);
         CREATE TABLE orders (id int PRIMARY KEY);
         INSERT INTO customers VALUES (1, 'ann');",
    )
    .await;
    let env = InProcess::start();
    env.create(connector(
        "dropper",
        &url,
        slot,
        json!({"slot.drop.on.stop": "true"}),
    ))
    .await;
    events(&env, "shop.public.customers", 1).await;
    // Streaming holds the slot: the stop must wait for the server to let
    // it go, then drop it, before it returns.
    fixtures::pg_script(&url, "INSERT INTO customers VALUES (2, 'bob')").await;
    events(&env, "shop.public.customers", 2).await;
    env.worker.stop("dropper").await.unwrap();
    let left = slot_holders(&base, slot).await;
    assert!(left.is_empty(), "the slot outlived the stop: {left:?}");
    env.worker.delete_connector("dropper").await;
}

/// The slot's confirmed position, as a number.
async fn confirmed_lsn(base: &str, slot: &str) -> Option<i64> {
    let rows = fixtures::db_rows(
        base,
        &format!(
            "SELECT (confirmed_flush_lsn - '0/0')::text FROM pg_replication_slots WHERE slot_name = '{slot}'"
        ),
    )
    .await;
    rows.first()?.first()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_cdc_heartbeats_advance_an_idle_slot_and_a_lost_connection_is_resumed() {
    let Some(base) = postgres_url() else { return };
    let slot = "sluice_cdc_heartbeat";
    drop_slot_if_any(&base, slot).await;
    let url = fixtures::fresh_pg_database(&base, "cdc_heartbeat").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE customers (id int PRIMARY KEY, name text);
         CREATE TABLE noise (n int);
         INSERT INTO customers VALUES (1, 'ann');",
    )
    .await;
    let env = InProcess::start();
    env.create(connector(
        "hb",
        &url,
        slot,
        json!({
            "table.include.list": "public.customers",
            "heartbeat.interval.ms": "300",
            "status.update.interval.ms": "300",
            "skipped.operations": "none",
        }),
    ))
    .await;
    events(&env, "shop.public.customers", 1).await;

    // Only tables that are not captured change: no event, yet heartbeats
    // are written and the slot lets go of the WAL they passed.
    fixtures::pg_script(&url, "INSERT INTO noise SELECT generate_series(1, 5000)").await;
    let written: i64 = fixtures::db_rows(&url, "SELECT (pg_current_wal_lsn() - '0/0')::text").await
        [0][0]
        .parse()
        .unwrap();
    let advanced = eventually(Duration::from_secs(60), "the idle slot to advance", || {
        let base = base.clone();
        async move { confirmed_lsn(&base, slot).await.filter(|c| *c >= written) }
    })
    .await;
    assert!(advanced >= written);
    let heartbeats = fixtures::topic_records(
        env.broker.bootstrap_servers(),
        "__debezium-heartbeat.shop",
        1,
        "heartbeats",
    )
    .await;
    let beat: Value = serde_json::from_slice(heartbeats[0].payload().unwrap()).unwrap();
    assert!(payload(&beat)["ts_ms"].as_i64().unwrap() > 0, "{beat}");
    assert_eq!(
        fixtures::read_topic(env.broker.bootstrap_servers(), "shop.public.customers").len(),
        1,
        "no change event for tables that are not captured"
    );

    // The slot's lag is exported, per connector and task.
    let metrics = eventually(Duration::from_secs(30), "the slot lag gauge", || async {
        let text = env.worker.metrics().render();
        text.lines()
            .any(|l| {
                l.starts_with(
                    "sluice_source_replication_slot_lag_bytes{connector=\"hb\",task=\"0\"}",
                )
            })
            .then_some(text)
    })
    .await;
    assert!(metrics.contains("# TYPE sluice_source_replication_slot_lag_bytes gauge"));

    // The replication connection is killed under the task: it reconnects
    // from its last position, and nothing is lost or written twice.
    for round in 0..2 {
        let killed = fixtures::db_rows(
            &base,
            &format!(
                "SELECT pg_terminate_backend(active_pid)::text FROM pg_replication_slots WHERE slot_name = '{slot}' AND active_pid IS NOT NULL"
            ),
        )
        .await;
        assert_eq!(
            killed,
            [["true"]],
            "round {round}: the walsender was running"
        );
        let first = 10 * (round + 1);
        fixtures::pg_script(
            &url,
            &format!(
                "INSERT INTO customers VALUES ({first}, 'a'), ({}, 'b'); UPDATE customers SET name = 'x' WHERE id = 1;",
                first + 1
            ),
        )
        .await;
        events(&env, "shop.public.customers", 1 + 3 * (round as usize + 1)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let all = events(&env, "shop.public.customers", 7).await;
    assert_eq!(all.len(), 7, "an event was written twice after a reconnect");
    let lsns: Vec<i64> = all[1..]
        .iter()
        .map(|(_, v)| payload(v)["source"]["lsn"].as_i64().unwrap())
        .collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "{lsns:?}");
    // A truncate (skipped.operations=none): an event with no key, whose
    // key is written as null with no schema (as Debezium's).
    fixtures::pg_script(&url, "TRUNCATE customers").await;
    let all = events(&env, "shop.public.customers", 8).await;
    assert_eq!(payload(&all[7].1)["op"], "t");
    assert_eq!(all[7].0, Value::Null, "a truncate has no key");
    let status = env.worker.status("hb").await.unwrap();
    assert_eq!(
        status.tasks[0].1.state,
        sluice_runtime::task::State::Running,
        "a lost connection is retried, not a failure"
    );
    env.worker.delete_connector("hb").await;
}

/// The second server (`scripts/postgres.sh start target`), loudly required.
fn target_url() -> String {
    std::env::var("SLUICE_TEST_POSTGRES_TARGET_URL").unwrap_or_else(|_| {
        panic!(
            "SLUICE_TEST_POSTGRES_TARGET_URL is not set: run the tests through scripts/test.sh, which starts the second PostgreSQL server"
        )
    })
}

/// Rows of `table` as text, ordered by `id` (none while it does not exist).
async fn table_rows(url: &str, table: &str, columns: &str) -> Vec<Vec<String>> {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let rows = sqlx::query(&format!("SELECT {columns} FROM {table} ORDER BY id"))
        .fetch_all(&mut conn)
        .await
        .unwrap_or_default();
    rows.iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.get::<Option<String>, _>(i)
                        .unwrap_or_else(|| "NULL".into())
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_cdc_replicates_tables_into_another_server_through_the_jdbc_sink() {
    let Some(base) = postgres_url() else { return };
    let target_base = target_url();
    let slot = "sluice_cdc_replica";
    drop_slot_if_any(&base, slot).await;
    let url = fixtures::fresh_pg_database(&base, "cdc_replica_src").await;
    let target = fixtures::fresh_pg_database(&target_base, "cdc_replica_dst").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2));
         CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int NOT NULL, placed timestamp(3), note text);
         INSERT INTO customers VALUES (1, 'ann', 10.50), (2, 'bob', 0.00);
         INSERT INTO orders VALUES (10, 1, '2026-03-04 05:06:07.890', 'x');",
    )
    .await;
    let env = InProcess::start();
    env.create(connector("replica-src", &url, slot, json!({})))
        .await;
    events(&env, "shop.public.orders", 1).await;
    env.create(json!({"name": "replica-sink", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "connection.url": target,
        "topics": "shop.public.customers,shop.public.orders",
        "table.name.format": "${source.table}",
        "pk.mode": "record_key",
        "insert.mode": "upsert",
        "delete.enabled": "true",
        "auto.create": "true",
        "delivery.guarantee": "exactly-once",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }}))
    .await;
    fixtures::pg_script(
        &url,
        "INSERT INTO customers VALUES (3, 'cy', 3.25);
         UPDATE customers SET balance = 99.99 WHERE id = 1;
         DELETE FROM customers WHERE id = 2;
         BEGIN;
           INSERT INTO orders VALUES (11, 3, '2026-03-05 00:00:00', NULL);
           UPDATE orders SET note = 'y' WHERE id = 10;
         COMMIT;",
    )
    .await;
    let columns = "id::text, name, balance::text";
    let expected = table_rows(&url, "customers", columns).await;
    eventually(Duration::from_secs(60), "the customers replicated", || {
        let (target, expected) = (target.clone(), expected.clone());
        async move { (table_rows(&target, "customers", columns).await == expected).then_some(()) }
    })
    .await;
    // The timestamp, a Debezium Timestamp (milliseconds) in the event,
    // lands as a number the target can hold; the rows match.
    let orders_src = table_rows(&url, "orders", "id::text, customer_id::text, note").await;
    eventually(Duration::from_secs(60), "the orders replicated", || {
        let (target, expected) = (target.clone(), orders_src.clone());
        async move {
            (table_rows(&target, "orders", "id::text, customer_id::text, note").await == expected)
                .then_some(())
        }
    })
    .await;
    assert_eq!(
        table_rows(&target, "customers", columns).await,
        vec![
            vec!["1".to_string(), "ann".into(), "99.99".into()],
            vec!["3".to_string(), "cy".into(), "3.25".into()],
        ]
    );
    env.worker.delete_connector("replica-sink").await;
    env.worker.delete_connector("replica-src").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_sink_routes_change_events_by_regex_and_keeps_the_newest_by_lsn_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let env = InProcess::start();
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let event = |op: &str, id: i64, name: &str, table: &str, lsn: i64| {
        format!(
            r#"{{"before":null,"after":{{"id":{id},"name":"{name}"}},"source":{{"db":"shop","schema":"public","table":"{table}","lsn":{lsn},"ts_ms":{lsn}}},"op":"{op}","ts_ms":1}}"#
        )
    };
    // The update of LSN 200 arrives after the one of LSN 300 (a replay,
    // or two topics' partitions read out of step).
    let items = [
        event("c", 1, "a", "items", 100),
        event("u", 1, "c", "items", 300),
        event("u", 1, "b", "items", 200),
        event("c", 2, "x", "items", 150),
    ];
    let key1 = r#"{"id":1}"#;
    let key2 = r#"{"id":2}"#;
    fixtures::produce(
        &bootstrap,
        "shop.public.items",
        &[
            (Some(key1), items[0].as_bytes()),
            (Some(key1), items[1].as_bytes()),
            (Some(key1), items[2].as_bytes()),
            (Some(key2), items[3].as_bytes()),
        ],
    )
    .await;
    // A snapshot row, a truncate (no key), a row after it.
    let other = event("r", 7, "o", "other", 50);
    let truncate = r#"{"before":null,"after":null,"source":{"db":"shop","schema":"public","table":"other","lsn":60},"op":"t","ts_ms":1}"#;
    let after_truncate = event("c", 8, "p", "other", 70);
    fixtures::produce(
        &bootstrap,
        "shop.public.other",
        &[
            (Some(r#"{"id":7}"#), other.as_bytes()),
            (None, truncate.as_bytes()),
            (Some(r#"{"id":8}"#), after_truncate.as_bytes()),
        ],
    )
    .await;
    fixtures::produce(
        &bootstrap,
        "unrelated",
        &[(Some(key1), b"{\"id\":1}".as_slice())],
    )
    .await;

    let sink = |name: &str, file: &str, guard: &str| {
        json!({"name": name, "config": {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": format!("jdbc:sqlite:{}", dir.path().join(file).display()),
            "topics.regex": "shop\\.public\\..*",
            "table.name.format": "${source.table}",
            "pk.mode": "record_key",
            "insert.mode": "upsert",
            "auto.create": "true",
            "change.events.guard": guard,
            "truncate.enabled": "true",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        }})
    };
    env.create(sink("guarded", "guarded.db", "lsn")).await;
    env.create(sink("unguarded", "unguarded.db", "none")).await;
    let sqlite = |file: &str| format!("sqlite:{}", dir.path().join(file).display());
    // Both sinks have written every event of `items` before the rows are
    // compared (a check done earlier could pass before the late event).
    for name in ["guarded", "unguarded"] {
        eventually(Duration::from_secs(120), "every event written", || async {
            let offsets = env.herder.offsets(name).await.ok()??;
            let at = |topic: &str, n: i64| {
                offsets.iter().any(|o| {
                    o["partition"]["kafka_topic"] == topic && o["offset"]["kafka_offset"] == n
                })
            };
            (at("shop.public.items", 4) && at("shop.public.other", 3)).then_some(())
        })
        .await;
    }
    let guarded = fixtures::db_rows(
        &sqlite("guarded.db"),
        "SELECT id, name, __source_lsn FROM items ORDER BY id",
    )
    .await;
    let unguarded = fixtures::db_rows(
        &sqlite("unguarded.db"),
        "SELECT id, name FROM items ORDER BY id",
    )
    .await;
    assert_eq!(
        guarded,
        [
            vec!["1".to_string(), "c".into(), "300".into()],
            vec!["2".into(), "x".into(), "150".into()]
        ],
        "the event of LSN 200 must not overwrite the one of LSN 300"
    );
    assert_eq!(
        unguarded,
        [
            vec!["1".to_string(), "b".into()],
            vec!["2".into(), "x".into()]
        ],
        "without the guard the last event read wins (what the guard prevents)"
    );
    // topics.regex: every table's topic, each into its own table; the
    // truncate (truncate.enabled) emptied `other` before its last row.
    let other_rows = fixtures::db_rows(&sqlite("guarded.db"), "SELECT id, name FROM other").await;
    assert_eq!(
        other_rows,
        [vec!["8".to_string(), "p".into()]],
        "the truncate emptied the table, the row after it is there"
    );
    let tables = fixtures::db_rows(
        &sqlite("guarded.db"),
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sluice%' ORDER BY name",
    )
    .await;
    assert_eq!(
        tables,
        [vec!["items".to_string()], vec!["other".into()]],
        "`unrelated` is not matched"
    );
}

/// The task itself, without a worker: a stop after a poll whose batch was
/// never committed to Kafka must not confirm that batch to the slot (a
/// SIGKILLed run's successor would find the slot past its stored offset:
/// data loss).
#[tokio::test(flavor = "multi_thread")]
async fn postgres_cdc_stop_confirms_only_what_was_committed() {
    use sluice_sdk::{SourceConnector, TaskContext};
    let Some(base) = postgres_url() else { return };
    let slot = "sluice_cdc_stop";
    drop_slot_if_any(&base, slot).await;
    let url = fixtures::fresh_pg_database(&base, "cdc_stop").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE customers (id int PRIMARY KEY, name text); INSERT INTO customers VALUES (1, 'ann');",
    )
    .await;
    let config: sluice_sdk::ConfigMap = connector(
        "stop",
        &url,
        slot,
        json!({"table.include.list": "public.customers"}),
    )["config"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !k.contains("converter") && *k != "connector.class")
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let connector = sluice_connector_postgres_cdc::PostgresCdcConnector;
    let mut task = connector
        .create_task(&config, TaskContext::default(), Default::default())
        .unwrap();
    // The snapshot, committed; then the stream is opened and committed.
    let mut polled = 0;
    while polled < 1 {
        polled += task.poll().await.unwrap().unwrap().len();
    }
    for _ in 0..3 {
        task.poll().await.unwrap();
        task.commit().await.unwrap();
    }
    let committed = eventually(Duration::from_secs(30), "the slot confirmed", || {
        let base = base.clone();
        async move { confirmed_lsn(&base, slot).await.filter(|c| *c > 0) }
    })
    .await;
    // Changes polled but never committed, then a stop.
    fixtures::pg_script(&url, "INSERT INTO customers VALUES (2, 'bob'), (3, 'cy')").await;
    let mut changes = Vec::new();
    while changes.is_empty() {
        changes = task.poll().await.unwrap().unwrap();
    }
    let change_lsn = changes[0].source_offset["lsn"].as_i64().unwrap();
    assert!(change_lsn > committed);
    task.stop().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = confirmed_lsn(&base, slot).await.unwrap();
    assert!(
        after < change_lsn,
        "the stop confirmed LSN {after}, past the uncommitted change at {change_lsn} (committed: {committed})"
    );
    drop_slot_if_any(&base, slot).await;
}
