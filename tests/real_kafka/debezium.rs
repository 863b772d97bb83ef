//! `postgres-cdc` beside Debezium's PostgreSQL connector running on Apache
//! Kafka Connect (`scripts/kafka-connect.sh` resolves it from Maven): both
//! capture one database, each with its own slot and publication, through
//! the same snapshot rows and the same streamed changes, and their events
//! are compared field by field, keys and values, schemas and payloads.
//!
//! Both read the same WAL, so LSNs, transaction ids, commit times and
//! `source.sequence` must agree exactly. Only what cannot agree is set
//! aside before comparing: the topic prefix (each connector writes its own
//! topics), the envelope's `ts_*` (when each connector processed the
//! event), and a snapshot row's `source.ts_*` (when each read it) and its
//! `source.lsn` and `source.sequence` (each slot's position). Every
//! other difference must be listed in docs/compatibility.md ("Accepted
//! differences (Debezium events)"), and a listed one no longer seen fails
//! the test as stale.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rdkafka::Message;
use serde_json::{Value, json};

use super::compat_rest::{
    assert_kafka_connect_has, healthy, kafka_connect, put_kafka_connect_connector,
};
use super::{broker, unique, write_connector, write_worker};
use crate::fixtures::{self, SluiceProcess};

const CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";

/// The captured tables and the rows the initial snapshots read.
const SCHEMA_AND_SNAPSHOT: &str = r#"
CREATE TABLE public.items (
  id          int4 PRIMARY KEY,
  c_int2      int2 NOT NULL,
  c_int8      int8 NOT NULL,
  c_text      text NOT NULL,
  c_varchar   varchar(20) NOT NULL,
  c_bool      bool NOT NULL,
  c_float4    float4 NOT NULL,
  c_float8    float8 NOT NULL,
  c_numeric   numeric(10,2) NOT NULL,
  c_date      date NOT NULL,
  c_timestamp timestamp NOT NULL,
  c_timestamptz timestamptz NOT NULL,
  c_time      time NOT NULL,
  c_uuid      uuid NOT NULL,
  c_json      json NOT NULL,
  c_jsonb     jsonb NOT NULL,
  c_bytea     bytea NOT NULL,
  c_nullable  text
);
CREATE TABLE public.nokey (a int4, b text);
INSERT INTO public.items VALUES
  (1, 1, 10000000001, 'one', 'v-one', true, 1.5, 2.25, 12345.67, '2024-01-15',
   '2024-01-15 10:20:30.123456', '2024-01-15 10:20:30.123456+02', '10:20:30.5',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": [1, 2, {"x": null}]}', '{"k": [1, 2, {"x": null}]}',
   '\x00ff10', 'not null here'),
  (2, -2, -20000000002, 'two', 'v-two', false, -0.25, -1e300, -0.01, '1999-12-31',
   '1999-12-31 23:59:59', '1999-12-31 23:59:59+00', '00:00:00',
   '00000000-0000-0000-0000-000000000000', '[]', '{}', '\x', NULL);
INSERT INTO public.nokey VALUES (1, 'snap');
"#;

/// The changes made once both connectors stream, one transaction each.
const CHANGES: &[&str] = &[
    r#"INSERT INTO public.items VALUES
       (3, 3, 3, 'three', 'v-three', true, 3.0, 3.000001, 3.30, '2024-02-29',
        '2024-02-29 12:00:00', '2024-02-29 12:00:00-05', '23:59:59.999999',
        'f47ac10b-58cc-4372-a567-0e02b2c3d479', '{"a":1}', '{"b": "c", "a": 1}', '\xdeadbeef', 'x')"#,
    // A non-key column (REPLICA IDENTITY DEFAULT: `before` is null).
    "UPDATE public.items SET c_text = 'one, updated', c_nullable = NULL WHERE id = 1",
    // The primary key: a delete, its tombstone and a create.
    "UPDATE public.items SET id = 20 WHERE id = 2",
    "DELETE FROM public.items WHERE id = 3",
    "INSERT INTO public.nokey VALUES (2, 'stream')",
    r#"BEGIN;
       INSERT INTO public.items VALUES
         (4, 4, 4, 'four', 'v-four', false, 4.0, 4.0, 4.00, '2024-04-04',
          '2024-04-04 04:04:04', '2024-04-04 04:04:04+00', '04:04:04',
          '4b1d4b1d-0000-4000-8000-000000000004', 'null', '"s"', '\x04', NULL);
       INSERT INTO public.nokey VALUES (NULL, NULL);
       COMMIT;"#,
    "TRUNCATE public.items",
    // A column added: later events carry it.
    "ALTER TABLE public.items ADD COLUMN c_added int4",
    r#"INSERT INTO public.items VALUES
       (5, 5, 5, 'five', 'v-five', true, 5.0, 5.0, 5.00, '2024-05-05',
        '2024-05-05 05:05:05', '2024-05-05 05:05:05+00', '05:05:05',
        '55555555-5555-4555-8555-555555555555', '{}', '{}', '\x05', NULL, 42)"#,
    // The table without a key, with the whole row as its identity.
    "ALTER TABLE public.nokey REPLICA IDENTITY FULL",
    "UPDATE public.nokey SET b = 'full' WHERE a = 2",
    "DELETE FROM public.nokey WHERE a = 1",
];

/// One side of the comparison: its topic prefix and where its events are.
struct Side {
    what: &'static str,
    prefix: String,
}

impl Side {
    fn topic(&self, table: &str) -> String {
        format!("{}.public.{table}", self.prefix)
    }

    /// The records of `table`'s topic as (key, value) JSON, in order.
    async fn events(&self, table: &str) -> Vec<(Value, Value)> {
        self.records(self.topic(table)).await
    }

    /// The records of the heartbeat topic.
    async fn heartbeats(&self) -> Vec<(Value, Value)> {
        self.records(format!("__debezium-heartbeat.{}", self.prefix))
            .await
    }

    /// The records of `topic` as (key, value) JSON, in order.
    async fn records(&self, topic: String) -> Vec<(Value, Value)> {
        let (bootstrap, table) = (broker().bootstrap.clone(), topic.clone());
        let exists = {
            let (b, t) = (bootstrap.clone(), topic.clone());
            tokio::task::spawn_blocking(move || super::high_watermarks(&b, &t) > 0)
                .await
                .unwrap_or(false)
        };
        if !exists {
            return Vec::new();
        }
        let messages =
            tokio::task::spawn_blocking(move || fixtures::read_topic(&bootstrap, &topic))
                .await
                .unwrap();
        let parse = |bytes: Option<&[u8]>| {
            bytes
                .map(|b| {
                    serde_json::from_slice(b).unwrap_or_else(|e| {
                        panic!(
                            "{}'s record in {table} is not JSON ({e}): {}",
                            self.what,
                            String::from_utf8_lossy(b)
                        )
                    })
                })
                .unwrap_or(Value::Null)
        };
        messages
            .iter()
            .map(|m| (parse(m.key()), parse(m.payload())))
            .collect()
    }
}

/// What the test compares of an event: its key and value, with `prefix`
/// replaced by `<prefix>` wherever it names a topic or the server, and the
/// times that cannot agree replaced by what they are.
fn normalised(value: &Value, prefix: &str, snapshot_row: bool) -> Value {
    fn walk(v: &Value, prefix: &str) -> Value {
        match v {
            Value::String(s) if s == prefix => json!("<prefix>"),
            Value::String(s) if s.starts_with(&format!("{prefix}.")) => {
                json!(format!("<prefix>{}", &s[prefix.len()..]))
            }
            Value::Array(items) => Value::Array(items.iter().map(|i| walk(i, prefix)).collect()),
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), walk(v, prefix)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    let mut out = walk(value, prefix);
    let processed = |v: &mut Value, what: &str| {
        if v.is_i64() {
            *v = json!(format!("<{what}>"));
        }
    };
    if let Some(payload) = out.get_mut("payload").filter(|p| p.is_object()) {
        for t in ["ts_ms", "ts_us", "ts_ns"] {
            if let Some(v) = payload.get_mut(t) {
                processed(v, "processing time");
            }
            if snapshot_row && let Some(v) = payload.pointer_mut(&format!("/source/{t}")) {
                processed(v, "snapshot read time");
            }
        }
        // Each connector's snapshot is at the position of its own slot.
        if snapshot_row && let Some(source) = payload.get_mut("source") {
            if source["lsn"].is_i64() {
                source["lsn"] = json!("<snapshot position>");
            }
            if source["sequence"].is_string() {
                source["sequence"] = json!("<snapshot position>");
            }
        }
    }
    out
}

/// Every difference between `dbz` and `sl`, as `path: debezium | sluice`;
/// the path names fields (and a schema's fields by their `field`), not
/// array positions, so that one extra field is one difference.
fn differences(path: &str, dbz: &Value, sl: &Value, out: &mut Vec<(String, String)>) {
    let is_fields = |items: &Vec<Value>| {
        items
            .iter()
            .all(|i| i.get("field").and_then(Value::as_str).is_some())
    };
    match (dbz, sl) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => differences(&format!("{path}.{k}"), x, y, out),
                    (x, _) => out.push((
                        format!("{path}.{k}"),
                        format!(
                            "present in {} only",
                            if x.is_some() {
                                "Debezium's"
                            } else {
                                "Sluice's"
                            }
                        ),
                    )),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if is_fields(a) && is_fields(b) && !a.is_empty() => {
            let name = |i: &Value| i["field"].as_str().unwrap().to_string();
            let order_a: Vec<String> = a.iter().map(name).collect();
            let order_b: Vec<String> = b.iter().map(name).collect();
            if order_a != order_b {
                out.push((
                    format!("{path}[field order]"),
                    format!("{order_a:?} | {order_b:?}"),
                ));
            }
            for f in order_a.iter().chain(&order_b).collect::<BTreeSet<_>>() {
                let find = |items: &Vec<Value>| {
                    items
                        .iter()
                        .find(|i| &name(i) == f)
                        .cloned()
                        .unwrap_or(Value::Null)
                };
                differences(&format!("{path}[{f}]"), &find(a), &find(b), out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push((path.to_string(), format!("{a} | {b}"))),
    }
}

/// The differences between Debezium's record and Sluice's (each with its
/// side's topic prefix), keys then values, normalised, into `found` as
/// `<label> <path>`.
fn compare_records(
    label: &str,
    (dbz, dbz_prefix): (&(Value, Value), &str),
    (sl, sl_prefix): (&(Value, Value), &str),
    snapshot_row: bool,
    found: &mut Vec<(String, String)>,
) {
    let mut diffs = Vec::new();
    for (part, d, s) in [("key", &dbz.0, &sl.0), ("value", &dbz.1, &sl.1)] {
        differences(
            part,
            &normalised(d, dbz_prefix, snapshot_row),
            &normalised(s, sl_prefix, snapshot_row),
            &mut diffs,
        );
    }
    for (path, detail) in diffs {
        found.push((format!("{label} {path}"), detail));
    }
}

/// The accepted differences: `docs/compatibility.md`'s rows
/// `| \`path\` | ... |` under "### Accepted differences (Debezium events)",
/// a path as [`differences`] names it after `<table> <op>` (`*` for any).
fn accepted() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(fixtures::repo_root().join("docs/compatibility.md"))
        .expect("docs/compatibility.md");
    let section = doc
        .split("\n### Accepted differences (Debezium events)")
        .nth(1)
        .expect(
            "docs/compatibility.md has a section \"### Accepted differences (Debezium events)\"",
        );
    let section = section.split("\n#").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| {
            let mut cells = l.trim().strip_prefix('|')?.split('|').map(str::trim);
            let path = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            Some(path.to_string())
        })
        .collect()
}

/// Drops the replication slots of the test's database once no connector
/// holds them (a deleted connector's task lets go of its slot shortly
/// after).
async fn drop_slots(base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let active = fixtures::db_rows(
            base,
            "SELECT CAST(COUNT(*) AS TEXT) FROM pg_replication_slots \
             WHERE database = 'debezium_diff' AND active",
        )
        .await;
        if active[0][0] == "0" || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    fixtures::pg_script(
        base,
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
         WHERE database = 'debezium_diff' AND NOT active",
    )
    .await;
}

/// The event's `op`, `tombstone` for a tombstone.
fn op_of(value: &Value) -> String {
    value
        .pointer("/payload/op")
        .and_then(Value::as_str)
        .unwrap_or(if value.is_null() { "tombstone" } else { "?" })
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_cdc_writes_the_events_debezium_writes_field_by_field() {
    let Some(base) = crate::postgres::postgres_url() else {
        return;
    };
    let http = reqwest::Client::new();
    let kc_url = kafka_connect().to_string();
    healthy(&http, &kc_url, "Kafka Connect's /health").await;
    assert_kafka_connect_has(
        &http,
        &kc_url,
        CLASS,
        "Debezium's PostgreSQL connector",
        "postgres-plugin",
    )
    .await;

    // What an earlier, failed run left: its Debezium connector (which
    // keeps its slot open) and the slots, which keep the database from
    // being dropped.
    if let Some(names) = crate::distributed::get_json(&http, &format!("{kc_url}/connectors"))
        .await
        .and_then(|v| v.as_array().cloned())
    {
        for name in names.iter().filter_map(Value::as_str) {
            if name.contains("dbzdiff") {
                let _ = http
                    .delete(format!("{kc_url}/connectors/{name}"))
                    .send()
                    .await;
            }
        }
    }
    drop_slots(&base).await;
    let db_url = fixtures::fresh_pg_database(&base, "debezium_diff").await;
    fixtures::pg_script(&db_url, SCHEMA_AND_SNAPSHOT).await;
    let parsed = reqwest::Url::parse(&db_url).expect("a postgres:// URL");
    let run = unique("dbzdiff");
    let slot_of = |who: &str| format!("{who}_{}", std::process::id());
    let config = |prefix: &str, slot: &str| {
        json!({
            "connector.class": CLASS,
            "tasks.max": "1",
            "database.hostname": parsed.host_str().unwrap(),
            "database.port": parsed.port().unwrap_or(5432).to_string(),
            "database.user": parsed.username(),
            "database.password": parsed.password().unwrap_or(""),
            "database.dbname": "debezium_diff",
            "topic.prefix": prefix,
            "plugin.name": "pgoutput",
            "slot.name": slot,
            "publication.name": format!("{slot}_pub"),
            "publication.autocreate.mode": "filtered",
            "table.include.list": "public.items,public.nokey",
            "snapshot.mode": "initial",
            "skipped.operations": "none",
            "heartbeat.interval.ms": "1000",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "true",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
        })
    };
    let debezium = Side {
        what: "Debezium",
        prefix: format!("{run}-dbz"),
    };
    let sluice_side = Side {
        what: "Sluice",
        prefix: format!("{run}-sl"),
    };
    let (dbz_slot, sl_slot) = (slot_of("dbzdiff_dbz"), slot_of("dbzdiff_sl"));

    // Debezium on Kafka Connect ...
    put_kafka_connect_connector(
        &http,
        &kc_url,
        &run,
        &config(&debezium.prefix, &dbz_slot),
        "Debezium's PostgreSQL connector",
    )
    .await;
    // ... and postgres-cdc on a Sluice worker, with the same config.
    let dir = tempfile::tempdir().unwrap();
    let worker = write_worker(dir.path(), &broker().bootstrap, "worker", json!({}));
    let connector = write_connector(
        dir.path(),
        &format!("{run}-sluice"),
        config(&sluice_side.prefix, &sl_slot),
    );
    let mut sluice = SluiceProcess::start(dir.path(), &[&worker, &connector]);

    // Both snapshots out (each slot was made before its snapshot: a change
    // from now on is streamed to both, never read by a snapshot).
    let deadline = Instant::now() + Duration::from_secs(180);
    for side in [&debezium, &sluice_side] {
        while side.events("items").await.len() < 2 || side.events("nokey").await.is_empty() {
            let state =
                crate::distributed::get_json(&http, &format!("{kc_url}/connectors/{run}/status"))
                    .await
                    .unwrap_or(Value::Null);
            assert!(
                Instant::now() < deadline,
                "{}'s snapshot never arrived.\nDebezium's status: {state}\nSluice's log:\n{}",
                side.what,
                sluice.log_text()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    for change in CHANGES {
        fixtures::pg_script(&db_url, change).await;
    }

    // Everything out on both sides: the last change is nokey's delete.
    let last_delete = |events: &[(Value, Value)]| {
        events
            .iter()
            .any(|(_, v)| op_of(v) == "d" && v.pointer("/payload/before/b") == Some(&json!("snap")))
    };
    for side in [&debezium, &sluice_side] {
        while !last_delete(&side.events("nokey").await) {
            assert!(
                Instant::now() < deadline,
                "{}'s events of the streamed changes never all arrived; Sluice's log:\n{}",
                side.what,
                sluice.log_text()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // A moment for anything after the last expected event (there should be
    // nothing: both must then hold the same number of events), and the
    // first heartbeat of each (idle once the changes are out).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let beats_deadline = Instant::now() + Duration::from_secs(30);
    while (debezium.heartbeats().await.is_empty() || sluice_side.heartbeats().await.is_empty())
        && Instant::now() < beats_deadline
    {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let mut found: Vec<(String, String)> = Vec::new();
    // A heartbeat of each (their number depends on timing): the first.
    let (dbz_beats, sl_beats) = (debezium.heartbeats().await, sluice_side.heartbeats().await);
    match (dbz_beats.first(), sl_beats.first()) {
        (Some(dbz), Some(sl)) => compare_records(
            "heartbeat -",
            (dbz, &debezium.prefix),
            (sl, &sluice_side.prefix),
            false,
            &mut found,
        ),
        (d, s) => found.push((
            "heartbeat - topic".into(),
            format!(
                "{} | {} heartbeats (heartbeat.interval.ms=1000)",
                d.map_or(0, |_| dbz_beats.len()),
                s.map_or(0, |_| sl_beats.len())
            ),
        )),
    }
    for table in ["items", "nokey"] {
        let (dbz, sl) = (
            debezium.events(table).await,
            sluice_side.events(table).await,
        );
        let ops =
            |events: &[(Value, Value)]| events.iter().map(|(_, v)| op_of(v)).collect::<Vec<_>>();
        assert_eq!(
            ops(&dbz),
            ops(&sl),
            "{table}: the events' ops in order (Debezium, Sluice)"
        );
        for (d, s) in dbz.iter().zip(&sl) {
            let op = op_of(&d.1);
            compare_records(
                &format!("{table} {op}"),
                (d, &debezium.prefix),
                (s, &sluice_side.prefix),
                op == "r",
                &mut found,
            );
        }
    }
    let accepted = accepted();
    let matches = |entry: &str, seen: &str| {
        let (mut e, mut s) = (entry.splitn(3, ' '), seen.splitn(3, ' '));
        (0..3).all(|_| match (e.next(), s.next()) {
            (Some("*"), Some(_)) => true,
            (Some(a), Some(b)) => a == b,
            _ => false,
        })
    };
    let unexpected: Vec<String> = found
        .iter()
        .filter(|(path, _)| !accepted.iter().any(|a| matches(a, path)))
        .map(|(path, detail)| format!("{path}: {detail}"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let stale: Vec<&String> = accepted
        .iter()
        .filter(|a| !found.iter().any(|(path, _)| matches(a, path)))
        .collect();

    let _ = http
        .delete(format!("{kc_url}/connectors/{run}"))
        .send()
        .await;
    sluice.terminate(Duration::from_secs(30));
    drop_slots(&base).await;
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "postgres-cdc against Debezium {} on Kafka Connect, on the same changes \
         (`<table> <op> <path>: Debezium's | Sluice's`).\n\
         Differences not in docs/compatibility.md (\"Accepted differences (Debezium events)\"):\n  {}\n\
         Listed there but no longer seen (stale):\n  {}",
        std::env::var("KAFKA_CONNECT_POSTGRES_SOURCE").unwrap_or_default(),
        unexpected.join("\n  "),
        stale
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}
