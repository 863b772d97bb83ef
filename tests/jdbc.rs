//! The JDBC sink against SQLite, a real PostgreSQL and a real MariaDB: the
//! same scenarios on each (insert modes, key modes, auto.create and
//! auto.evolve, deletes, the upsert guard, quoting, a bad row, the
//! exactly-once transaction with its offsets table, and columns typed from
//! records' schemas).

use sluice_connector_jdbc::JdbcSinkConnector;
use std::sync::Arc;

use sluice_sdk::{
    CommitOffset, ConfigMap, ErrorKind, PartitionOffset, Record, Schema, SinkConnector, SinkTask,
    TaskContext,
};

use crate::fixtures::{self, MariaDbInstance, PgInstance};

struct Db {
    url: String,
    mysql: bool,
    /// Makes table names unique on a server shared by several tests.
    prefix: String,
}

impl Db {
    fn table(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// `CAST(expr AS <text>)` for the database.
    fn text(&self, expr: &str) -> String {
        let ty = if self.mysql { "CHAR" } else { "TEXT" };
        format!("CAST({expr} AS {ty})")
    }

    fn q(&self, ident: &str) -> String {
        if self.mysql {
            format!("`{ident}`")
        } else {
            format!("\"{ident}\"")
        }
    }

    async fn rows(&self, sql: &str) -> Vec<Vec<String>> {
        fixtures::db_rows(&self.url, sql).await
    }

    fn config(&self, extra: &[(&str, &str)]) -> ConfigMap {
        let mut c: ConfigMap =
            [("connection.url".to_string(), format!("jdbc:{}", self.url))].into();
        for (k, v) in extra {
            c.insert(k.to_string(), v.to_string());
        }
        c
    }

    async fn task(&self, extra: &[(&str, &str)]) -> Box<dyn SinkTask> {
        self.task_numbered(extra, 0).await
    }

    /// Task `task_id` of the connector: tasks of one connector share its
    /// offsets.
    async fn task_numbered(&self, extra: &[(&str, &str)], task_id: u32) -> Box<dyn SinkTask> {
        let ctx = TaskContext {
            connector: format!("{}conn", self.prefix),
            task_id,
            ..Default::default()
        };
        let mut t = JdbcSinkConnector
            .create_task(&self.config(extra), ctx)
            .unwrap();
        t.start().await.unwrap();
        t
    }
}

fn rec(topic: &str, offset: i64, key: Option<&str>, value: Option<&str>) -> Record {
    Record {
        topic: topic.into(),
        partition: 0,
        offset,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        ..Default::default()
    }
}

fn strings(rows: &[&[&str]]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(|s| s.to_string()).collect())
        .collect()
}

async fn conformance(db: &Db) {
    insert_modes(db).await;
    key_modes(db).await;
    create_and_evolve(db).await;
    deletes(db).await;
    guard(db).await;
    quoting_and_a_bad_row(db).await;
    exactly_once_transaction(db).await;
    keys_equal_after_coercion(db).await;
    exact_decimals(db).await;
    fenced_commits(db).await;
    fenced_commits_across_partitions(db).await;
    columns_from_schemas(db).await;
}

async fn insert_modes(db: &Db) {
    let t = db.table("modes");
    let upsert = [
        ("insert.mode", "upsert"),
        ("pk.mode", "record_key"),
        ("pk.fields", "id"),
        ("auto.create", "true"),
        ("table.name.format", t.as_str()),
    ];
    let mut sink = db.task(&upsert).await;
    let batch = vec![
        rec("m", 0, Some("1"), Some(r#"{"name": "a", "n": 1}"#)),
        rec("m", 1, Some("2"), Some(r#"{"name": "b", "n": 2}"#)),
        rec("m", 2, Some("1"), Some(r#"{"name": "a2", "n": 3}"#)),
    ];
    sink.put(batch.clone()).await.unwrap();
    // A replay changes nothing; the last record for a key wins.
    sink.put(batch).await.unwrap();
    let select = format!(
        "SELECT {}, name, {} FROM {} ORDER BY id",
        db.text("id"),
        db.text("n"),
        db.q(&t)
    );
    assert_eq!(
        db.rows(&select).await,
        strings(&[&["1", "a2", "3"], &["2", "b", "2"]])
    );
    sink.stop().await;

    // update: existing rows change, unknown keys are not inserted.
    let mut update = upsert;
    update[0] = ("insert.mode", "update");
    let mut sink = db.task(&update).await;
    sink.put(vec![
        rec("m", 3, Some("2"), Some(r#"{"name": "b2", "n": 20}"#)),
        rec("m", 4, Some("9"), Some(r#"{"name": "ghost", "n": 9}"#)),
    ])
    .await
    .unwrap();
    assert_eq!(
        db.rows(&select).await,
        strings(&[&["1", "a2", "3"], &["2", "b2", "20"]])
    );
    sink.stop().await;

    // insert: a second insert of a key is a constraint violation, a data error.
    let mut insert = upsert;
    insert[0] = ("insert.mode", "insert");
    let mut sink = db.task(&insert).await;
    let err = sink
        .put(vec![rec(
            "m",
            5,
            Some("1"),
            Some(r#"{"name": "dup", "n": 0}"#),
        )])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data, "{}", err.full_message());
    sink.stop().await;
}

async fn key_modes(db: &Db) {
    // pk.mode=kafka: the coordinates are the key.
    let t = db.table("kafka_pk");
    let mut sink = db
        .task(&[
            ("pk.mode", "kafka"),
            ("auto.create", "true"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![rec("k", 7, None, Some(r#"{"v": "x"}"#))])
        .await
        .unwrap();
    let got = db
        .rows(&format!(
            "SELECT __connect_topic, {}, {}, v FROM {}",
            db.text("__connect_partition"),
            db.text("__connect_offset"),
            db.q(&t)
        ))
        .await;
    assert_eq!(got, strings(&[&["k", "0", "7", "x"]]));
    sink.stop().await;

    // pk.mode=record_value with a composite key, fields.whitelist.
    let t = db.table("value_pk");
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "region,id"),
            ("fields.whitelist", "region,id,total"),
            ("auto.create", "true"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![
        rec(
            "v",
            0,
            None,
            Some(r#"{"region": "eu", "id": 1, "total": 5, "secret": "s"}"#),
        ),
        rec(
            "v",
            1,
            None,
            Some(r#"{"region": "us", "id": 1, "total": 6}"#),
        ),
        rec(
            "v",
            2,
            None,
            Some(r#"{"region": "eu", "id": 1, "total": 7}"#),
        ),
    ])
    .await
    .unwrap();
    let got = db
        .rows(&format!(
            "SELECT region, {}, {} FROM {} ORDER BY region",
            db.text("id"),
            db.text("total"),
            db.q(&t)
        ))
        .await;
    assert_eq!(got, strings(&[&["eu", "1", "7"], &["us", "1", "6"]]));
    sink.stop().await;
}

async fn create_and_evolve(db: &Db) {
    let t = db.table("evolve");
    let numeric = if db.url.starts_with("sqlite") {
        "NUMERIC"
    } else {
        "NUMERIC(12,2)"
    };
    let base = [
        ("insert.mode", "upsert"),
        ("pk.mode", "record_key"),
        ("pk.fields", "id"),
        ("auto.create", "true"),
        ("table.name.format", t.as_str()),
        ("auto.create.column.amount.type", numeric),
    ];
    let mut sink = db.task(&base).await;
    sink.put(vec![rec("e", 0, Some("1"), Some(r#"{"amount": 12.5}"#))])
        .await
        .unwrap();
    // A new field without auto.evolve: a data error naming the column.
    let err = sink
        .put(vec![rec(
            "e",
            1,
            Some("2"),
            Some(r#"{"amount": 1, "note": "n"}"#),
        )])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data);
    assert!(err.message.contains("`note`"), "{}", err.message);
    sink.stop().await;

    let mut evolving = base.to_vec();
    evolving.push(("auto.evolve", "true"));
    let mut sink = db.task(&evolving).await;
    sink.put(vec![rec(
        "e",
        1,
        Some("2"),
        Some(r#"{"amount": 1, "note": "n", "qty": 3}"#),
    )])
    .await
    .unwrap();
    let got = db
        .rows(&format!(
            "SELECT {}, {}, note, {} FROM {} ORDER BY id",
            db.text("id"),
            db.text("amount"),
            db.text("qty"),
            db.q(&t)
        ))
        .await;
    let (a1, a2) = if db.url.starts_with("sqlite") {
        ("12.5", "1")
    } else {
        ("12.50", "1.00")
    };
    assert_eq!(
        got,
        strings(&[&["1", a1, "NULL", "NULL"], &["2", a2, "n", "3"]])
    );
    sink.stop().await;
}

async fn deletes(db: &Db) {
    let t = db.table("deletes");
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "id"),
            ("delete.enabled", "true"),
            ("auto.create", "true"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![
        rec("d", 0, Some("1"), Some(r#"{"v": "one"}"#)),
        rec("d", 1, Some("2"), Some(r#"{"v": "two"}"#)),
        rec("d", 2, Some("3"), Some(r#"{"v": "three"}"#)),
    ])
    .await
    .unwrap();
    sink.put(vec![
        // A tombstone deletes; within a batch the last operation on a key wins.
        rec("d", 3, Some("1"), None),
        rec("d", 4, Some("2"), None),
        rec("d", 5, Some("2"), Some(r#"{"v": "two again"}"#)),
        rec("d", 6, Some("4"), Some(r#"{"v": "four"}"#)),
        rec("d", 7, Some("4"), None),
        // Deleting what is not there is not an error.
        rec("d", 8, Some("99"), None),
    ])
    .await
    .unwrap();
    let got = db
        .rows(&format!(
            "SELECT {}, v FROM {} ORDER BY id",
            db.text("id"),
            db.q(&t)
        ))
        .await;
    assert_eq!(got, strings(&[&["2", "two again"], &["3", "three"]]));
    sink.stop().await;
}

async fn guard(db: &Db) {
    let t = db.table("guarded");
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "id"),
            ("upsert.guard.column", "version"),
            ("auto.create", "true"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![rec(
        "g",
        0,
        Some("1"),
        Some(r#"{"version": 5, "v": "five"}"#),
    )])
    .await
    .unwrap();
    // An older replay does not overwrite newer data; a newer one does; in
    // a batch the newest wins whatever the order.
    sink.put(vec![rec(
        "g",
        1,
        Some("1"),
        Some(r#"{"version": 3, "v": "three"}"#),
    )])
    .await
    .unwrap();
    let select = format!(
        "SELECT {}, {}, v FROM {} ORDER BY id",
        db.text("id"),
        db.text("version"),
        db.q(&t)
    );
    assert_eq!(db.rows(&select).await, strings(&[&["1", "5", "five"]]));
    sink.put(vec![
        rec("g", 2, Some("1"), Some(r#"{"version": 8, "v": "eight"}"#)),
        rec("g", 3, Some("1"), Some(r#"{"version": 6, "v": "six"}"#)),
        rec("g", 4, Some("2"), Some(r#"{"version": 1, "v": "new"}"#)),
    ])
    .await
    .unwrap();
    assert_eq!(
        db.rows(&select).await,
        strings(&[&["1", "8", "eight"], &["2", "1", "new"]])
    );
    // A record without the guard value cannot be ordered: a data error.
    let err = sink
        .put(vec![rec("g", 5, Some("1"), Some(r#"{"v": "?"}"#))])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data);
    assert!(
        err.message.contains("upsert.guard.column"),
        "{}",
        err.message
    );
    sink.stop().await;

    // update mode honours the guard too.
    let mut sink = db
        .task(&[
            ("insert.mode", "update"),
            ("pk.mode", "record_key"),
            ("pk.fields", "id"),
            ("upsert.guard.column", "version"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![
        rec("g", 6, Some("1"), Some(r#"{"version": 7, "v": "stale"}"#)),
        rec("g", 7, Some("2"), Some(r#"{"version": 2, "v": "newer"}"#)),
    ])
    .await
    .unwrap();
    assert_eq!(
        db.rows(&select).await,
        strings(&[&["1", "8", "eight"], &["2", "2", "newer"]])
    );
    sink.stop().await;
}

async fn quoting_and_a_bad_row(db: &Db) {
    // A table named like a keyword, with mixed case and keyword columns.
    let t = format!("{}Order", db.prefix);
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "order"),
            ("auto.create", "true"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![rec(
        "o",
        0,
        Some("1"),
        Some(r#"{"Select": "x", "from": 2, "MixedCase": true}"#),
    )])
    .await
    .unwrap();
    let got = db
        .rows(&format!(
            "SELECT {}, {}, {} FROM {}",
            db.text(&db.q("order")),
            db.q("Select"),
            db.text(&db.q("from")),
            db.q(&t)
        ))
        .await;
    assert_eq!(got, strings(&[&["1", "x", "2"]]));
    sink.stop().await;

    // A NOT NULL column: a batch with one bad row fails as a data error
    // and writes nothing (the runtime then isolates the row).
    let t = db.table("strict");
    let create = format!(
        "CREATE TABLE {} (id BIGINT PRIMARY KEY, name VARCHAR(50) NOT NULL)",
        db.q(&t)
    );
    fixtures::db_exec(&db.url, &create).await;
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "id"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    let err = sink
        .put(vec![
            rec("s", 0, Some("1"), Some(r#"{"name": "ok"}"#)),
            rec("s", 1, Some("2"), Some(r#"{"name": null}"#)),
            rec("s", 2, Some("3"), Some(r#"{"name": "ok too"}"#)),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data, "{}", err.full_message());
    let count = db
        .rows(&format!("SELECT {} FROM {}", db.text("COUNT(*)"), db.q(&t)))
        .await;
    assert_eq!(count, strings(&[&["0"]]));
    sink.stop().await;
}

async fn exactly_once_transaction(db: &Db) {
    let t = db.table("eos");
    let offsets = db.table("offsets");
    let cfg = [
        ("insert.mode", "insert"),
        ("pk.mode", "kafka"),
        ("auto.create", "true"),
        ("table.name.format", t.as_str()),
        ("offsets.table.name", offsets.as_str()),
    ];
    let mut sink = db.task(&cfg).await;
    assert!(sink.supports_exactly_once());
    let part = vec![("x".to_string(), 0)];
    assert!(sink.stored_offsets(&part).await.unwrap().is_empty());
    let at = |offset| {
        vec![PartitionOffset {
            topic: "x".into(),
            partition: 0,
            offset,
        }]
    };
    let commit = |first, next| {
        vec![CommitOffset {
            topic: "x".into(),
            partition: 0,
            first,
            next,
        }]
    };

    // Rows and offsets commit together.
    sink.begin().await.unwrap();
    sink.put(vec![
        rec("x", 0, None, Some(r#"{"v": 0}"#)),
        rec("x", 1, None, Some(r#"{"v": 1}"#)),
    ])
    .await
    .unwrap();
    sink.commit(&commit(0, 2)).await.unwrap();
    assert_eq!(sink.stored_offsets(&part).await.unwrap(), at(2));

    // A rolled-back transaction leaves neither rows nor offsets.
    sink.begin().await.unwrap();
    sink.put(vec![rec("x", 2, None, Some(r#"{"v": 2}"#))])
        .await
        .unwrap();
    sink.rollback().await;
    assert_eq!(sink.stored_offsets(&part).await.unwrap(), at(2));

    // A put that fails inside the transaction leaves nothing of itself;
    // the rest of the transaction commits (the runtime's split around a
    // bad record). Offset 0 again violates the key: a data error.
    sink.begin().await.unwrap();
    let err = sink
        .put(vec![
            rec("x", 2, None, Some(r#"{"v": 2}"#)),
            rec("x", 0, None, Some(r#"{"v": 0}"#)),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data, "{}", err.full_message());
    sink.put(vec![rec("x", 2, None, Some(r#"{"v": 2}"#))])
        .await
        .unwrap();
    sink.commit(&commit(2, 4)).await.unwrap();
    let got = db
        .rows(&format!(
            "SELECT {} FROM {} ORDER BY __connect_offset",
            db.text("__connect_offset"),
            db.q(&t)
        ))
        .await;
    assert_eq!(got, strings(&[&["0"], &["1"], &["2"]]));
    assert_eq!(sink.stored_offsets(&part).await.unwrap(), at(4));
    sink.stop().await;

    // A stopped connector's offsets can be changed in the sink (KIP-875).
    let altered = JdbcSinkConnector
        .alter_offsets(
            &db.config(&cfg),
            &format!("{}conn", db.prefix),
            &[("x".into(), 0, Some(1)), ("y".into(), 3, None)],
        )
        .await
        .unwrap();
    assert!(altered);
    let mut sink = db.task(&cfg).await;
    assert_eq!(sink.stored_offsets(&part).await.unwrap(), at(1));
    sink.stop().await;
}

/// `1`, `1.0` and `"1"` are one BIGINT key to the database: one row, the
/// last record's, not a batch the database refuses ("cannot affect row a
/// second time").
async fn keys_equal_after_coercion(db: &Db) {
    let t = db.table("coerced");
    db.rows(&format!(
        "CREATE TABLE {} (id BIGINT PRIMARY KEY, v VARCHAR(20))",
        db.q(&t)
    ))
    .await;
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "id"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![
        rec("c", 0, None, Some(r#"{"id": 1, "v": "int"}"#)),
        rec("c", 1, None, Some(r#"{"id": 1.0, "v": "float"}"#)),
        rec("c", 2, None, Some(r#"{"id": "1", "v": "text"}"#)),
        rec("c", 3, None, Some(r#"{"id": 2, "v": "other"}"#)),
    ])
    .await
    .unwrap();
    assert_eq!(
        db.rows(&format!(
            "SELECT {}, v FROM {} ORDER BY id",
            db.text("id"),
            db.q(&t)
        ))
        .await,
        strings(&[&["1", "text"], &["2", "other"]])
    );
    sink.stop().await;
}

/// A decimal wider than a double keeps every digit into NUMERIC, written
/// as a JSON string or as a JSON number.
async fn exact_decimals(db: &Db) {
    let t = db.table("decimals");
    db.rows(&format!(
        "CREATE TABLE {} (id BIGINT PRIMARY KEY, amount NUMERIC(20,2), tiny DECIMAL(38,20))",
        db.q(&t)
    ))
    .await;
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "id"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![
        rec(
            "d",
            0,
            None,
            Some(r#"{"id": 1, "amount": "12345678901234567.89", "tiny": "0.00000000000000000001"}"#),
        ),
        rec(
            "d",
            1,
            None,
            Some(r#"{"id": 2, "amount": 12345678901234567.89, "tiny": 123456789012345678.12345678901234567891}"#),
        ),
        rec("d", 2, None, Some(r#"{"id": 3, "amount": 7, "tiny": -1.5e-3}"#)),
    ])
    .await
    .unwrap();
    let got = db
        .rows(&format!(
            "SELECT {}, {} FROM {} ORDER BY id",
            db.text("amount"),
            db.text("tiny"),
            db.q(&t)
        ))
        .await;
    if db.url.starts_with("sqlite:") {
        // SQLite has no exact decimal type: a NUMERIC column holds the
        // nearest double (as an integer when it is one); no less.
        let written = [
            ("12345678901234567.89", "0.00000000000000000001"),
            (
                "12345678901234567.89",
                "123456789012345678.12345678901234567891",
            ),
            ("7", "-1.5e-3"),
        ];
        for (id, (amount, tiny)) in (1..).zip(written) {
            let same = db
                .rows(&format!(
                    "SELECT amount = CAST('{amount}' AS REAL), tiny = CAST('{tiny}' AS REAL) FROM {} WHERE id = {id}",
                    db.q(&t)
                ))
                .await;
            assert_eq!(same, strings(&[&["1", "1"]]), "row {id}: {got:?}");
        }
    } else {
        assert_eq!(
            got,
            strings(&[
                &["12345678901234567.89", "0.00000000000000000001"],
                &[
                    "12345678901234567.89",
                    "123456789012345678.12345678901234567891"
                ],
                &["7.00", "-0.00150000000000000000"],
            ])
        );
    }
    // Not a number: a data error of the record, naming the column.
    let err = sink
        .put(vec![rec(
            "d",
            3,
            None,
            Some(r#"{"id": 4, "amount": "12,5"}"#),
        )])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data, "{}", err.full_message());
    assert!(
        err.full_message().contains("amount"),
        "{}",
        err.full_message()
    );
    sink.stop().await;
}

/// Records with a value schema (`value.converter.schemas.enable=true`):
/// `auto.create` takes each column's type and `NOT NULL` from the schema,
/// as Confluent's JDBC sink does, and each logical value is written as its
/// column takes it (a `Decimal` exactly, a `Date`, `Time` and `Timestamp`
/// from milliseconds, `bytes` as bytes); `auto.evolve` adds a new field's
/// column with its schema's type, nullable.
async fn columns_from_schemas(db: &Db) {
    let t = db.table("typed");
    let schema = Arc::new(Schema::structure([
        ("id", Schema::int64()),
        ("amount", Schema::decimal(2)),
        ("day", Schema::date().optional()),
        ("at", Schema::timestamp()),
        ("t", Schema::time().optional()),
        ("ok", Schema::boolean().optional()),
        ("ratio", Schema::float64().optional()),
        ("small", Schema::int16().optional()),
        ("blob", Schema::bytes().optional()),
        ("note", Schema::string().optional()),
        ("tags", Schema::array(Schema::string()).optional()),
    ]));
    let typed = |offset: i64, value: &str, schema: &Arc<Schema>| Record {
        value_schema: Some(schema.clone()),
        ..rec("typed", offset, None, Some(value))
    };
    let mut sink = db
        .task(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "id"),
            ("auto.create", "true"),
            ("auto.evolve", "true"),
            ("table.name.format", t.as_str()),
        ])
        .await;
    sink.put(vec![typed(
        0,
        r#"{"id":1,"amount":12345678901234567890.12,"day":1704067200000,"at":1704067200123,"t":49500250,"ok":true,"ratio":0.5,"small":7,"blob":"AAE=","note":"x","tags":["a","b"]}"#,
        &schema,
    )])
    .await
    .unwrap();
    let (sqlite, mysql) = (db.url.starts_with("sqlite:"), db.mysql);
    let columns = if sqlite {
        format!(
            "SELECT name, lower(type), CAST(\"notnull\" AS TEXT) FROM pragma_table_info('{t}') ORDER BY cid"
        )
    } else if mysql {
        format!(
            "SELECT CAST(column_name AS CHAR), CAST(lower(column_type) AS CHAR), CAST(is_nullable = 'NO' AS CHAR) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = '{t}' ORDER BY ordinal_position"
        )
    } else {
        format!(
            "SELECT column_name::text, data_type::text, CASE WHEN is_nullable = 'NO' THEN '1' ELSE '0' END FROM information_schema.columns WHERE table_name = '{t}' ORDER BY ordinal_position"
        )
    };
    let expected: [(&str, [&str; 3], &str); 11] = [
        // (column, its type on SQLite, PostgreSQL, MariaDB, NOT NULL)
        ("id", ["integer", "bigint", "bigint(20)"], "1"),
        ("amount", ["numeric", "numeric", "decimal(65,2)"], "1"),
        ("day", ["date", "date", "date"], "0"),
        (
            "at",
            ["timestamp", "timestamp with time zone", "datetime(3)"],
            "1",
        ),
        ("t", ["time", "time without time zone", "time(3)"], "0"),
        ("ok", ["boolean", "boolean", "tinyint(1)"], "0"),
        ("ratio", ["real", "double precision", "double"], "0"),
        ("small", ["integer", "smallint", "smallint(6)"], "0"),
        ("blob", ["blob", "bytea", "longblob"], "0"),
        ("note", ["text", "text", "text"], "0"),
        // MariaDB's JSON is a LONGTEXT that must hold valid JSON.
        ("tags", ["text", "jsonb", "longtext"], "0"),
    ];
    let which = if sqlite {
        0
    } else if mysql {
        2
    } else {
        1
    };
    let want: Vec<Vec<String>> = expected
        .iter()
        .map(|(c, types, nn)| vec![c.to_string(), types[which].to_string(), nn.to_string()])
        .collect();
    assert_eq!(db.rows(&columns).await, want, "the columns of {t}");

    let hex = if sqlite || mysql {
        format!("hex({})", db.q("blob"))
    } else {
        format!("encode({}, 'hex')", db.q("blob"))
    };
    // PostgreSQL's TIMESTAMPTZ shown in UTC, whatever the session's zone.
    let instant = |c: &str| {
        if which == 1 {
            db.text(&format!("{c} AT TIME ZONE 'UTC'"))
        } else {
            db.text(c)
        }
    };
    let row = db
        .rows(&format!(
            "SELECT {}, {}, {}, {}, {}, {} FROM {}",
            db.text("amount"),
            db.text("day"),
            instant("at"),
            db.text("t"),
            hex,
            db.text("tags"),
            db.q(&t)
        ))
        .await;
    let (amount, time) = match which {
        // SQLite's NUMERIC holds the nearest double.
        0 => ("1.23456789012346e+19", "13:45:00.250"),
        1 => ("12345678901234567890.12", "13:45:00.25"),
        _ => ("12345678901234567890.12", "13:45:00.250"),
    };
    assert_eq!(
        row,
        strings(&[&[
            amount,
            "2024-01-01",
            "2024-01-01 00:00:00.123",
            time,
            "0001",
            if which == 1 {
                r#"["a", "b"]"#
            } else {
                r#"["a","b"]"#
            },
        ]])
    );

    // A new field: its column is added with its schema's type, nullable.
    let evolved = Arc::new(Schema::structure([
        ("id", Schema::int64()),
        ("amount", Schema::decimal(2)),
        ("at", Schema::timestamp()),
        ("seen", Schema::timestamp()),
    ]));
    sink.put(vec![typed(
        1,
        r#"{"id":2,"amount":1.5,"at":0,"seen":86400000}"#,
        &evolved,
    )])
    .await
    .unwrap();
    let seen = db
        .rows(&format!(
            "SELECT {} FROM {} WHERE id = 2",
            instant("seen"),
            db.q(&t)
        ))
        .await;
    let seen_text = match which {
        1 => "1970-01-02 00:00:00",
        _ => "1970-01-02 00:00:00.000",
    };
    assert_eq!(seen, strings(&[&[seen_text]]));
    // A required field's column is NOT NULL: a null there is the record's error.
    let err = sink
        .put(vec![typed(2, r#"{"id":3,"amount":null,"at":0}"#, &schema)])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data, "{}", err.full_message());
    sink.stop().await;
}

/// The keys of a sink that inserts plain rows into `table` and keeps its
/// exactly-once offsets in `offsets`.
fn insert_only<'a>(table: &'a str, offsets: &'a str) -> [(&'static str, &'a str); 4] {
    [
        ("insert.mode", "insert"),
        ("pk.mode", "none"),
        ("table.name.format", table),
        ("offsets.table.name", offsets),
    ]
}

/// Two tasks of one connector that both believe they own a partition (a
/// zombie and the new owner): the one that commits second is fenced, so
/// no record is written twice and the stored offset never goes back.
async fn fenced_commits(db: &Db) {
    let t = db.table("fenced");
    let offsets = db.table("fenced_offsets");
    // Made beforehand: a table created inside the first task's open
    // transaction would hold the second back until it ends.
    db.rows(&format!("CREATE TABLE {} (n BIGINT)", db.q(&t)))
        .await;
    let cfg = insert_only(&t, &offsets);
    let batch = |from: i64, to: i64| -> Vec<Record> {
        (from..to)
            .map(|o| rec("f", o, None, Some(&format!(r#"{{"n": {o}}}"#))))
            .collect()
    };
    let at = |offset| {
        vec![PartitionOffset {
            topic: "f".into(),
            partition: 0,
            offset,
        }]
    };
    let commit = |first, next| {
        vec![CommitOffset {
            topic: "f".into(),
            partition: 0,
            first,
            next,
        }]
    };
    let part = vec![("f".to_string(), 0)];
    let mut a = db.task_numbered(&cfg, 0).await;
    let mut b = db.task_numbered(&cfg, 1).await;
    // SQLite has one writer at a time: there the zombie's whole
    // transaction comes after the owner's, which is the same race decided.
    let interleaved = !db.url.starts_with("sqlite:");
    for (from, owner_to, zombie_to) in [(0, 10, 10), (10, 15, 20)] {
        assert!(
            a.stored_offsets(&part)
                .await
                .unwrap()
                .iter()
                .all(|o| o.offset <= from)
        );
        if interleaved {
            a.begin().await.unwrap();
            a.put(batch(from, zombie_to)).await.unwrap();
        }
        b.begin().await.unwrap();
        b.put(batch(from, owner_to)).await.unwrap();
        b.commit(&commit(from, owner_to)).await.unwrap();
        if !interleaved {
            a.begin().await.unwrap();
            a.put(batch(from, zombie_to)).await.unwrap();
        }
        let fenced = a.commit(&commit(from, zombie_to)).await;
        a.rollback().await;
        let err = fenced.expect_err("the zombie's commit must be fenced");
        assert_eq!(err.kind, ErrorKind::Retriable, "{}", err.full_message());
        assert!(err.is_fenced(), "{}", err.full_message());
        assert_eq!(b.stored_offsets(&part).await.unwrap(), at(owner_to));
        let count = db
            .rows(&format!("SELECT {} FROM {}", db.text("COUNT(*)"), db.q(&t)))
            .await;
        assert_eq!(
            count,
            strings(&[&[&owner_to.to_string()]]),
            "rows after {from}"
        );
    }
    // A batch whose range ends before it begins (read backwards) never
    // moves the stored offset back: that would have the records after it
    // read and written again.
    b.begin().await.unwrap();
    b.put(batch(12, 15)).await.unwrap();
    let backwards = b.commit(&commit(15, 12)).await;
    b.rollback().await;
    let err = backwards.expect_err("an offset moved backwards must be refused");
    assert!(err.is_fenced(), "{}", err.full_message());
    assert_eq!(b.stored_offsets(&part).await.unwrap(), at(15));
    let count = db
        .rows(&format!("SELECT {} FROM {}", db.text("COUNT(*)"), db.q(&t)))
        .await;
    assert_eq!(count, strings(&[&["15"]]), "rows after a backwards batch");
    a.stop().await;
    b.stop().await;
}

/// One commit spans many partitions (a batch of thousands of records
/// spans dozens): every partition's offset is stored, those new to the
/// connector and those moved on alike; and if one partition is fenced,
/// none is stored and none of the batch's rows stays.
async fn fenced_commits_across_partitions(db: &Db) {
    let t = db.table("fenced_many");
    let offsets = db.table("fenced_many_offsets");
    db.rows(&format!("CREATE TABLE {} (n BIGINT)", db.q(&t)))
        .await;
    let cfg = insert_only(&t, &offsets);
    // (partition, first, next) for each partition of a batch.
    let batch = |ranges: &[(i32, i64, i64)]| -> Vec<Record> {
        ranges
            .iter()
            .flat_map(|&(partition, first, next)| {
                (first..next).map(move |o| Record {
                    partition,
                    ..rec("g", o, None, Some(&format!(r#"{{"n": {o}}}"#)))
                })
            })
            .collect()
    };
    let commit = |ranges: &[(i32, i64, i64)]| -> Vec<CommitOffset> {
        ranges
            .iter()
            .map(|&(partition, first, next)| CommitOffset {
                topic: "g".into(),
                partition,
                first,
                next,
            })
            .collect()
    };
    let partitions: Vec<(String, i32)> = (0..40).map(|p| ("g".to_string(), p)).collect();
    let stored = |offsets: Vec<PartitionOffset>| -> Vec<(i32, i64)> {
        let mut at: Vec<(i32, i64)> = offsets.iter().map(|o| (o.partition, o.offset)).collect();
        at.sort();
        at
    };
    let count = || async {
        db.rows(&format!("SELECT {} FROM {}", db.text("COUNT(*)"), db.q(&t)))
            .await
    };
    let mut a = db.task_numbered(&cfg, 0).await;
    let mut b = db.task_numbered(&cfg, 1).await;

    // 20 partitions, all new: each offset is inserted.
    let first: Vec<_> = (0..20).map(|p| (p, 0, 3)).collect();
    b.begin().await.unwrap();
    b.put(batch(&first)).await.unwrap();
    b.commit(&commit(&first)).await.unwrap();
    // 40 partitions, half moved on and half new, in one commit.
    let second: Vec<_> = (0..40)
        .map(|p| if p < 20 { (p, 3, 5) } else { (p, 0, 2) })
        .collect();
    b.begin().await.unwrap();
    b.put(batch(&second)).await.unwrap();
    b.commit(&commit(&second)).await.unwrap();
    let expected: Vec<(i32, i64)> = (0..40).map(|p| (p, if p < 20 { 5 } else { 2 })).collect();
    assert_eq!(
        stored(b.stored_offsets(&partitions).await.unwrap()),
        expected
    );
    assert_eq!(count().await, strings(&[&["140"]]));

    // A zombie's commit where all but one partition would move on: the
    // one another task wrote past (partition 31, stored at 2) fences it
    // all, and nothing of it is stored.
    let zombie: Vec<_> = (0..40)
        .map(|p| match p {
            31 => (p, 0, 4),
            p if p < 20 => (p, 5, 7),
            p => (p, 2, 4),
        })
        .collect();
    a.begin().await.unwrap();
    a.put(batch(&zombie)).await.unwrap();
    let fenced = a.commit(&commit(&zombie)).await;
    a.rollback().await;
    let err = fenced.expect_err("a commit with one fenced partition must be refused whole");
    assert!(err.is_fenced(), "{}", err.full_message());
    assert!(
        err.full_message().contains("g-31"),
        "{}",
        err.full_message()
    );
    assert_eq!(
        stored(a.stored_offsets(&partitions).await.unwrap()),
        expected
    );
    assert_eq!(
        count().await,
        strings(&[&["140"]]),
        "rows after the fenced commit"
    );

    // A partition new to the connector goes in beside one moved on.
    let new_one = [(0, 5, 6), (40, 0, 1)];
    a.begin().await.unwrap();
    a.put(batch(&new_one)).await.unwrap();
    a.commit(&commit(&new_one)).await.unwrap();
    let all: Vec<(String, i32)> = (0..41).map(|p| ("g".to_string(), p)).collect();
    let after = stored(a.stored_offsets(&all).await.unwrap());
    assert_eq!(after.first(), Some(&(0, 6)));
    assert_eq!(after.last(), Some(&(40, 1)));
    assert_eq!(count().await, strings(&[&["142"]]));
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_sink_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db {
        url: format!("sqlite:{}", dir.path().join("sink.db").display()),
        mysql: false,
        prefix: String::new(),
    };
    conformance(&db).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_sink_on_postgres() {
    let Some(pg) = PgInstance::start() else {
        return;
    };
    let db = Db {
        url: pg.url(),
        mysql: false,
        prefix: String::new(),
    };
    conformance(&db).await;
}

/// On PostgreSQL a batch's rows go in parts of at most 1000, each sent
/// while the server runs the one before (tokio-postgres pipelining), in
/// the batch's one transaction, over TLS when the URL asks for it. A
/// statement-level trigger records each statement the sink runs and its
/// transaction; a single statement (sqlx, which cannot pipeline) would
/// write the 2500 rows in one.
#[tokio::test(flavor = "multi_thread")]
async fn jdbc_sink_writes_a_batch_in_pipelined_parts_on_postgres() {
    let Some(pg) = PgInstance::start_with_tls() else {
        return;
    };
    // `require`: no plaintext connection can serve the sink.
    let url = format!("{}?sslmode=require", pg.url());
    let db = Db {
        url: url.clone(),
        mysql: false,
        prefix: String::new(),
    };
    for sql in [
        "CREATE TABLE parts (id BIGINT PRIMARY KEY, v TEXT CHECK (v <> 'bad'))",
        "CREATE TABLE statements (xid TEXT, n BIGINT)",
        "CREATE FUNCTION log_statement() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN INSERT INTO statements SELECT txid_current()::text, count(*) FROM new_rows; \
         RETURN NULL; END $$",
        "CREATE TRIGGER parts_log AFTER INSERT ON parts REFERENCING NEW TABLE AS new_rows \
         FOR EACH STATEMENT EXECUTE FUNCTION log_statement()",
    ] {
        fixtures::db_exec(&url, sql).await;
    }
    let records = |ids: std::ops::Range<i64>, bad: Option<i64>| -> Vec<Record> {
        ids.map(|id| {
            let v = if Some(id) == bad { "bad" } else { "ok" };
            let value = format!(r#"{{"id": {id}, "v": "{v}"}}"#);
            rec("p", id, None, Some(&value))
        })
        .collect()
    };
    let cfg = [
        ("insert.mode", "upsert"),
        ("pk.mode", "record_value"),
        ("pk.fields", "id"),
        ("table.name.format", "parts"),
        ("offsets.table.name", "parts_offsets"),
    ];
    let mut sink = db.task(&cfg).await;

    sink.put(records(0..2500, None)).await.unwrap();
    let logged = db
        .rows("SELECT xid, CAST(n AS TEXT) FROM statements ORDER BY n DESC")
        .await;
    let counts: Vec<&str> = logged.iter().map(|r| r[1].as_str()).collect();
    assert_eq!(counts, ["834", "834", "832"], "{logged:?}");
    assert!(
        logged.iter().all(|r| r[0] == logged[0][0]),
        "one transaction: {logged:?}"
    );
    let count = || db.rows("SELECT CAST(count(*) AS TEXT) FROM parts");
    assert_eq!(count().await, strings(&[&["2500"]]));

    // A bad row in the second part: the parts after it fail too (the
    // transaction is aborted), the error is the bad row's, and nothing of
    // the batch is written.
    let err = sink.put(records(2500..5000, Some(3700))).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data, "{}", err.full_message());
    assert!(
        err.full_message().contains("parts_v_check"),
        "{}",
        err.full_message()
    );
    assert_eq!(count().await, strings(&[&["2500"]]));

    // Exactly-once: the parts and the offsets in one transaction.
    fixtures::db_exec(&url, "DELETE FROM statements").await;
    sink.begin().await.unwrap();
    sink.put(records(2500..4000, None)).await.unwrap();
    let commit = [CommitOffset {
        topic: "p".into(),
        partition: 0,
        first: 2500,
        next: 4000,
    }];
    sink.commit(&commit).await.unwrap();
    assert_eq!(count().await, strings(&[&["4000"]]));
    let logged = db
        .rows("SELECT CAST(n AS TEXT) FROM statements ORDER BY n")
        .await;
    assert_eq!(logged, strings(&[&["750"], &["750"]]));
    let stored = sink.stored_offsets(&[("p".into(), 0)]).await.unwrap();
    assert_eq!(stored[0].offset, 4000);

    // The connection lost between the batch and its commit: a retriable
    // error, and the batch redone on a new connection commits.
    sink.begin().await.unwrap();
    sink.put(records(4000..5000, None)).await.unwrap();
    fixtures::db_exec(
        &url,
        "SELECT CAST(count(pg_terminate_backend(pid)) AS TEXT) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    )
    .await;
    let commit = [CommitOffset {
        topic: "p".into(),
        partition: 0,
        first: 4000,
        next: 5000,
    }];
    let err = sink.commit(&commit).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Retriable, "{}", err.full_message());
    assert_eq!(count().await, strings(&[&["4000"]]));
    let mut redone = None;
    for _ in 0..3 {
        let attempt = async {
            sink.begin().await?;
            sink.put(records(4000..5000, None)).await?;
            sink.commit(&commit).await
        };
        match attempt.await {
            Ok(()) => {
                redone = Some(());
                break;
            }
            Err(e) => assert_eq!(e.kind, ErrorKind::Retriable, "{}", e.full_message()),
        }
    }
    assert!(
        redone.is_some(),
        "the batch never committed on a new connection"
    );
    assert_eq!(count().await, strings(&[&["5000"]]));
    sink.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_sink_on_mariadb() {
    let Some(maria) = MariaDbInstance::start() else {
        return;
    };
    let db = Db {
        url: maria.url(),
        mysql: true,
        prefix: String::new(),
    };
    conformance(&db).await;
}

// How the sink classifies each error a database gives it
// (docs/jdbc-errors.md): real statements that fail, and what `classify`
// makes of the error; then the record-caused ones through the sink.

/// An earlier step that is meant to fail starts with this.
const MAY_FAIL: &str = "/* may fail */ ";

/// One way to make the database fail, and the kind the sink must give it.
struct Provoke {
    what: &'static str,
    kind: ErrorKind,
    /// `(connection, SQL)` in order: the last must fail, and its error (or
    /// its connection's) is classified. A connection is named by the user
    /// it logs in as ("" the administrator), `#n` for another connection of
    /// the same user; each stays open for the whole case.
    steps: Vec<(&'static str, String)>,
    /// Run as the administrator afterwards.
    cleanup: Vec<String>,
}

fn case(what: &'static str, kind: ErrorKind, steps: &[(&'static str, &str)]) -> Provoke {
    Provoke {
        what,
        kind,
        steps: steps.iter().map(|(c, s)| (*c, s.to_string())).collect(),
        cleanup: Vec::new(),
    }
}

/// One statement on the administrator's connection.
fn sql(s: &str) -> (&'static str, &str) {
    ("", s)
}

enum AnyConn {
    Pg(sqlx::PgConnection),
    My(sqlx::MySqlConnection),
    Lite(sqlx::SqliteConnection),
}

impl AnyConn {
    /// `url` is a `Db` URL; `user` replaces its user ("" keeps it).
    async fn open(url: &str, user: &str) -> Result<AnyConn, sqlx::Error> {
        use sqlx::Connection;
        let with_user = |scheme: &str| match user {
            "" => url.to_string(),
            _ => {
                let rest = url.strip_prefix(scheme).unwrap();
                let host = rest.split_once('@').map(|(_, h)| h).unwrap_or(rest);
                format!("{scheme}{user}@{host}")
            }
        };
        Ok(if url.starts_with("postgres") {
            AnyConn::Pg(sqlx::PgConnection::connect(&with_user("postgres://")).await?)
        } else if url.starts_with("mysql") {
            AnyConn::My(sqlx::MySqlConnection::connect(&with_user("mysql://")).await?)
        } else {
            let path = url.strip_prefix("sqlite:").unwrap();
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true);
            AnyConn::Lite(sqlx::SqliteConnection::connect_with(&options).await?)
        })
    }

    async fn run(&mut self, sql: &str) -> Result<(), sqlx::Error> {
        match self {
            AnyConn::Pg(c) => sqlx::raw_sql(sql).execute(c).await.map(drop),
            AnyConn::My(c) => sqlx::raw_sql(sql).execute(c).await.map(drop),
            AnyConn::Lite(c) => sqlx::raw_sql(sql).execute(c).await.map(drop),
        }
    }
}

/// Runs each case on the database at `url`; returns what was classified
/// otherwise than expected, one line each.
async fn misclassified(url: &str, cases: Vec<Provoke>) -> Vec<String> {
    let mut wrong = Vec::new();
    for case in cases {
        let mut conns: Vec<(&str, AnyConn)> = Vec::new();
        let last = case.steps.len() - 1;
        let mut failure = None;
        for (i, (name, sql)) in case.steps.iter().enumerate() {
            let result = async {
                let at = match conns.iter().position(|(n, _)| n == name) {
                    Some(at) => at,
                    None => {
                        let user = name.split('#').next().unwrap_or_default();
                        conns.push((name, AnyConn::open(url, user).await?));
                        conns.len() - 1
                    }
                };
                conns[at].1.run(sql).await
            }
            .await;
            match result {
                Err(e) if i == last => failure = Some(e),
                Err(e) if !sql.starts_with(MAY_FAIL) => {
                    panic!("{}: step `{sql}` failed: {e}", case.what)
                }
                _ => {}
            }
        }
        drop(conns);
        if !case.cleanup.is_empty() {
            let mut admin = AnyConn::open(url, "").await.unwrap();
            for sql in &case.cleanup {
                admin.run(sql).await.unwrap();
            }
        }
        match failure {
            None => wrong.push(format!("{}: the last step did not fail", case.what)),
            Some(e) => {
                let shown = e.to_string();
                let got = sluice_connector_jdbc::classify(case.what.into(), e).kind;
                if got != case.kind {
                    wrong.push(format!(
                        "{}: {got}, expected {} ({shown})",
                        case.what, case.kind
                    ));
                }
            }
        }
    }
    wrong
}

/// `CREATE TABLE name (c0 INT, ..)` with `n` columns.
fn wide_table(name: &str, n: usize) -> String {
    let columns: Vec<String> = (0..n).map(|i| format!("c{i} INT")).collect();
    format!("CREATE TABLE {name} ({})", columns.join(", "))
}

fn postgres_cases() -> Vec<Provoke> {
    use ErrorKind::{Data, Fatal, Retriable};
    let wide = wide_table("wide", 1601);
    vec![
        // What one record can cause: data errors.
        case(
            "23505 unique",
            Data,
            &[
                sql("CREATE TABLE u (id INT PRIMARY KEY)"),
                sql("INSERT INTO u VALUES (1)"),
                sql("INSERT INTO u VALUES (1)"),
            ],
        ),
        case(
            "23502 not null",
            Data,
            &[
                sql("CREATE TABLE nn (id INT, v TEXT NOT NULL)"),
                sql("INSERT INTO nn VALUES (1, NULL)"),
            ],
        ),
        case(
            "23503 foreign key",
            Data,
            &[
                sql("CREATE TABLE fp (id INT PRIMARY KEY)"),
                sql("CREATE TABLE fc (p INT REFERENCES fp)"),
                sql("INSERT INTO fc VALUES (5)"),
            ],
        ),
        case(
            "23514 check",
            Data,
            &[
                sql("CREATE TABLE ck (v INT CHECK (v > 0))"),
                sql("INSERT INTO ck VALUES (-1)"),
            ],
        ),
        case(
            "23P01 exclusion",
            Data,
            &[
                sql("CREATE TABLE ex (r INT4RANGE, EXCLUDE USING gist (r WITH &&))"),
                sql("INSERT INTO ex VALUES ('[1,5)')"),
                sql("INSERT INTO ex VALUES ('[3,7)')"),
            ],
        ),
        case(
            "22001 value too long",
            Data,
            &[
                sql("CREATE TABLE tl (v VARCHAR(2))"),
                sql("INSERT INTO tl VALUES ('abc')"),
            ],
        ),
        case(
            "22003 out of range",
            Data,
            &[
                sql("CREATE TABLE nr (v INT)"),
                sql("INSERT INTO nr VALUES (99999999999)"),
            ],
        ),
        case(
            "22P02 not a number",
            Data,
            &[
                sql("CREATE TABLE ir (v INT)"),
                sql("INSERT INTO ir VALUES ('x')"),
            ],
        ),
        case(
            "22007 not a time",
            Data,
            &[
                sql("CREATE TABLE dt (v TIMESTAMPTZ)"),
                sql("INSERT INTO dt VALUES ('not a time')"),
            ],
        ),
        case(
            "22021 a NUL character",
            Data,
            &[sql(r"SELECT convert_from('\x00'::bytea, 'UTF8')")],
        ),
        case(
            "21000 one upsert meets a key twice",
            Data,
            &[
                sql("CREATE TABLE tw (at TIMESTAMPTZ PRIMARY KEY, v TEXT)"),
                sql(
                    "INSERT INTO tw VALUES ('2026-01-01T00:00:00Z', 'a'), ('2026-01-01T01:00:00+01:00', 'b') \
                 ON CONFLICT (at) DO UPDATE SET v = excluded.v",
                ),
            ],
        ),
        case(
            "428C9 a value for a generated column",
            Data,
            &[
                sql("CREATE TABLE gen (id INT, d INT GENERATED ALWAYS AS (id * 2) STORED)"),
                sql("INSERT INTO gen (id, d) VALUES (1, 5)"),
            ],
        ),
        case(
            "42701 a field named like a system column",
            Data,
            &[
                sql("CREATE TABLE sys (id INT)"),
                sql("ALTER TABLE sys ADD COLUMN ctid TEXT"),
            ],
        ),
        case(
            "44000 view WITH CHECK OPTION",
            Data,
            &[
                sql("CREATE TABLE vt (id INT)"),
                sql("CREATE VIEW vv AS SELECT * FROM vt WHERE id > 0 WITH CHECK OPTION"),
                sql("INSERT INTO vv VALUES (-1)"),
            ],
        ),
        case(
            "54000 index row too large",
            Data,
            &[
                sql("CREATE TABLE big (v TEXT UNIQUE)"),
                sql(
                    "INSERT INTO big SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) i",
                ),
            ],
        ),
        case(
            "54001 JSON nested too deep",
            Data,
            &[sql("SELECT repeat('[', 100000)::jsonb")],
        ),
        case("54011 too many columns", Data, &[sql(&wide)]),
        case(
            "P0001 a trigger rejects the row",
            Data,
            &[
                sql("CREATE TABLE tr (v TEXT)"),
                sql(
                    "CREATE FUNCTION reject() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.v = 'bad' THEN RAISE EXCEPTION 'rejected'; END IF; \
                 ASSERT NEW.v <> 'worse', 'asserted'; RETURN NEW; END $$",
                ),
                sql(
                    "CREATE TRIGGER reject BEFORE INSERT ON tr FOR EACH ROW EXECUTE FUNCTION reject()",
                ),
                sql("INSERT INTO tr VALUES ('bad')"),
            ],
        ),
        case(
            "P0004 a trigger's assertion fails",
            Data,
            &[sql("INSERT INTO tr VALUES ('worse')")],
        ),
        // The database, not the record: retried.
        case(
            "25006 read-only transaction (a standby)",
            Retriable,
            &[
                sql("CREATE TABLE ro (id INT)"),
                sql("SET default_transaction_read_only = on"),
                sql("INSERT INTO ro VALUES (1)"),
            ],
        ),
        case(
            "25P02 in a failed transaction",
            Retriable,
            &[
                sql("BEGIN"),
                sql(&format!("{MAY_FAIL}SELECT 1/0")),
                sql("SELECT 1"),
            ],
        ),
        case(
            "55P03 lock not available",
            Retriable,
            &[
                sql("CREATE TABLE lk (id INT)"),
                ("#2", "BEGIN"),
                ("#2", "LOCK TABLE lk"),
                sql("SET lock_timeout = '100ms'"),
                sql("INSERT INTO lk VALUES (1)"),
            ],
        ),
        case(
            "57014 statement timeout",
            Retriable,
            &[
                sql("SET statement_timeout = '50ms'"),
                sql("SELECT pg_sleep(5)"),
            ],
        ),
        case(
            "40001 serialization failure",
            Retriable,
            &[
                sql("CREATE TABLE sf (id INT PRIMARY KEY, v INT)"),
                sql("INSERT INTO sf VALUES (1, 0)"),
                ("#2", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
                ("#2", "SELECT * FROM sf"),
                sql("UPDATE sf SET v = 1"),
                ("#2", "UPDATE sf SET v = 2"),
            ],
        ),
        case(
            "57P01 the session is terminated",
            Retriable,
            &[
                ("#2", "SET application_name = 'victim'"),
                sql(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'victim'",
                ),
                ("#2", "SELECT 1"),
            ],
        ),
        case(
            "53300 too many connections",
            Retriable,
            &[
                sql("CREATE ROLE capped LOGIN CONNECTION LIMIT 0"),
                ("capped", "SELECT 1"),
            ],
        ),
        // A table or column dropped since the sink looked: it looks again.
        case(
            "42P01 the table is gone",
            Retriable,
            &[sql("INSERT INTO gone VALUES (1)")],
        ),
        case(
            "42703 the column is gone",
            Retriable,
            &[
                sql("CREATE TABLE dc (id INT)"),
                sql("INSERT INTO dc (id, gone) VALUES (1, 2)"),
            ],
        ),
        // Configuration and bugs: fatal.
        case(
            "42501 insufficient privilege",
            Fatal,
            &[
                sql("CREATE ROLE reader LOGIN"),
                sql("CREATE TABLE priv (id INT)"),
                ("reader", "INSERT INTO priv VALUES (1)"),
            ],
        ),
        case("28000 unknown role", Fatal, &[("nobody", "SELECT 1")]),
        case("42601 syntax error", Fatal, &[sql("INSERT INTO")]),
        case(
            "3F000 unknown schema",
            Fatal,
            &[sql("CREATE TABLE nosuch.t (id INT)")],
        ),
        case(
            "42P10 no key for ON CONFLICT",
            Fatal,
            &[
                sql("CREATE TABLE nk (id INT, v INT)"),
                sql("INSERT INTO nk VALUES (1, 1) ON CONFLICT (id) DO NOTHING"),
            ],
        ),
    ]
}

fn mariadb_cases() -> Vec<Provoke> {
    use ErrorKind::{Data, Fatal, Retriable};
    let wide = wide_table("wide", 1100);
    let long_name = "x".repeat(70);
    let long_column = format!("ALTER TABLE tl ADD COLUMN {long_name} TEXT");
    let row_too_large = {
        let columns: Vec<String> = (0..300).map(|i| format!("c{i} VARCHAR(100)")).collect();
        format!("CREATE TABLE rs ({})", columns.join(", "))
    };
    let mut cases = vec![
        case(
            "1062 duplicate key",
            Data,
            &[
                sql("CREATE TABLE u (id INT PRIMARY KEY)"),
                sql("INSERT INTO u VALUES (1)"),
                sql("INSERT INTO u VALUES (1)"),
            ],
        ),
        case(
            "1048 NULL into NOT NULL",
            Data,
            &[
                sql("CREATE TABLE nn (id INT, v TEXT NOT NULL)"),
                sql("INSERT INTO nn VALUES (1, NULL)"),
            ],
        ),
        case(
            "1364 no value for a column without a default",
            Data,
            &[sql("INSERT INTO nn (id) VALUES (1)")],
        ),
        case(
            "1452 foreign key",
            Data,
            &[
                sql("CREATE TABLE fp (id INT PRIMARY KEY)"),
                sql("CREATE TABLE fc (p INT, FOREIGN KEY (p) REFERENCES fp (id))"),
                sql("INSERT INTO fc VALUES (5)"),
            ],
        ),
        case(
            "4025 check (MariaDB)",
            Data,
            &[
                sql("CREATE TABLE ck (v INT CHECK (v > 0))"),
                sql("INSERT INTO ck VALUES (-1)"),
            ],
        ),
        case(
            "1406 data too long",
            Data,
            &[
                sql("CREATE TABLE tl (v VARCHAR(2))"),
                sql("INSERT INTO tl VALUES ('abc')"),
            ],
        ),
        case(
            "1264 out of range",
            Data,
            &[
                sql("CREATE TABLE nr (v INT)"),
                sql("INSERT INTO nr VALUES (99999999999)"),
            ],
        ),
        case(
            "1366 not a number",
            Data,
            &[sql("INSERT INTO nr VALUES ('abc')")],
        ),
        case(
            "1292 not a date",
            Data,
            &[
                sql("CREATE TABLE dt (v DATE)"),
                sql("INSERT INTO dt VALUES ('2026-13-45')"),
            ],
        ),
        case(
            "1265 not one of an ENUM's values",
            Data,
            &[
                sql("CREATE TABLE en (v ENUM('a', 'b'))"),
                sql("INSERT INTO en VALUES ('c')"),
            ],
        ),
        case("1118 row size too large", Data, &[sql(&row_too_large)]),
        case(
            "1005 errno 185: too many columns (InnoDB)",
            Data,
            &[sql(&wide)],
        ),
        case("1059 identifier too long", Data, &[sql(&long_column)]),
        case(
            "1060 duplicate column name (case-insensitive)",
            Data,
            &[sql("CREATE TABLE dup (a INT, A INT)")],
        ),
        case(
            "1110 a column given twice",
            Data,
            &[sql("INSERT INTO tl (v, V) VALUES ('a', 'b')")],
        ),
        case(
            "1166 incorrect column name",
            Data,
            &[sql("ALTER TABLE tl ADD COLUMN `a ` TEXT")],
        ),
        case(
            "1369 view WITH CHECK OPTION",
            Data,
            &[
                sql("CREATE TABLE vt (id INT)"),
                sql("CREATE VIEW vv AS SELECT * FROM vt WHERE id > 0 WITH CHECK OPTION"),
                sql("INSERT INTO vv VALUES (-1)"),
            ],
        ),
        case(
            "1644 a trigger SIGNALs",
            Data,
            &[
                sql("CREATE TABLE tr (v TEXT)"),
                sql("CREATE TRIGGER reject BEFORE INSERT ON tr FOR EACH ROW \
                 IF NEW.v = 'bad' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'rejected'; END IF"),
                sql("INSERT INTO tr VALUES ('bad')"),
            ],
        ),
        case(
            "1906 a value for a generated column",
            Data,
            &[
                sql("CREATE TABLE gen (id INT, d INT AS (id * 2) PERSISTENT)"),
                sql("INSERT INTO gen (id, d) VALUES (1, 5)"),
            ],
        ),
        // The database, not the record: retried.
        case(
            "1205 lock wait timeout",
            Retriable,
            &[
                sql("CREATE TABLE lk (id INT PRIMARY KEY)"),
                sql("INSERT INTO lk VALUES (1)"),
                ("#2", "BEGIN"),
                ("#2", "SELECT * FROM lk FOR UPDATE"),
                sql("SET innodb_lock_wait_timeout = 1"),
                sql("UPDATE lk SET id = 2"),
            ],
        ),
        case(
            "1792 read-only transaction",
            Retriable,
            &[
                sql("START TRANSACTION READ ONLY"),
                sql("INSERT INTO lk VALUES (3)"),
            ],
        ),
        case(
            "1114 table full",
            Retriable,
            &[
                sql("SET max_heap_table_size = 16384"),
                sql("CREATE TABLE mem (id INT PRIMARY KEY, v VARCHAR(200)) ENGINE=MEMORY"),
                sql("INSERT INTO mem SELECT seq, REPEAT('x', 200) FROM seq_1_to_1000"),
            ],
        ),
        case(
            "1969 statement timeout",
            Retriable,
            &[
                sql("SET max_statement_time = 0.05"),
                sql("SELECT SUM(a.seq * b.seq) FROM seq_1_to_100000 a, seq_1_to_100000 b"),
            ],
        ),
        case(
            "1226 max_user_connections",
            Retriable,
            &[
                sql("CREATE USER capped WITH MAX_USER_CONNECTIONS 1"),
                sql("GRANT ALL ON sluice.* TO capped"),
                ("capped", "SELECT 1"),
                ("capped#2", "SELECT 1"),
            ],
        ),
        case(
            "1927 the connection is killed",
            Retriable,
            &[
                sql("CREATE USER victim"),
                sql("GRANT ALL ON sluice.* TO victim"),
                ("victim", "SELECT 1"),
                sql("KILL CONNECTION USER 'victim'"),
                ("victim", "SELECT 1"),
            ],
        ),
        case(
            "1146 the table is gone",
            Retriable,
            &[sql("INSERT INTO gone VALUES (1)")],
        ),
        case(
            "1054 the column is gone",
            Retriable,
            &[sql("INSERT INTO lk (id, gone) VALUES (4, 1)")],
        ),
        // Configuration and bugs: fatal.
        case(
            "1142 insert denied",
            Fatal,
            &[
                sql("CREATE USER reader"),
                sql("GRANT SELECT ON sluice.* TO reader"),
                ("reader", "INSERT INTO lk VALUES (5)"),
            ],
        ),
        case(
            "1045 access denied (password)",
            Fatal,
            &[
                sql("CREATE USER locked IDENTIFIED BY 'secret'"),
                ("locked", "SELECT 1"),
            ],
        ),
        case("1064 syntax error", Fatal, &[sql("INSERT INTO")]),
        case(
            "1071 key too long (pk.fields)",
            Fatal,
            &[sql(
                "CREATE TABLE kl (a VARCHAR(255), b VARCHAR(255), c VARCHAR(255), d VARCHAR(255), \
             PRIMARY KEY (a, b, c, d)) CHARACTER SET utf8mb4",
            )],
        ),
        case(
            "1170 TEXT key (column type)",
            Fatal,
            &[sql("CREATE TABLE kt (a TEXT PRIMARY KEY)")],
        ),
    ];
    let mut read_only = case(
        "1290 --read-only (a failover)",
        Retriable,
        &[
            sql("CREATE USER writer"),
            sql("GRANT ALL ON sluice.* TO writer"),
            sql("SET GLOBAL read_only = 1"),
            ("writer", "INSERT INTO lk VALUES (6)"),
        ],
    );
    read_only.cleanup = vec!["SET GLOBAL read_only = 0".into()];
    cases.push(read_only);
    let snapshot = case(
        "1020 record changed since read (snapshot isolation)",
        Retriable,
        &[
            ("#2", "SET SESSION innodb_snapshot_isolation = ON"),
            ("#2", "BEGIN"),
            ("#2", "SELECT * FROM lk"),
            sql("UPDATE lk SET id = 7 WHERE id = 1"),
            ("#2", "UPDATE lk SET id = 8 WHERE id = 7"),
        ],
    );
    cases.push(snapshot);
    cases
}

fn sqlite_cases(dir: &std::path::Path) -> Vec<Provoke> {
    use ErrorKind::{Data, Fatal, Retriable};
    let garbage = dir.join("garbage.db");
    std::fs::write(&garbage, vec![b'x'; 4096]).unwrap();
    let attach_garbage = format!("ATTACH '{}' AS g", garbage.display());
    let wide = wide_table("wide", 2001);
    vec![
        case(
            "2067 unique",
            Data,
            &[
                sql("CREATE TABLE u (id INT UNIQUE)"),
                sql("INSERT INTO u VALUES (1)"),
                sql("INSERT INTO u VALUES (1)"),
            ],
        ),
        case(
            "1555 primary key",
            Data,
            &[
                sql("CREATE TABLE p (id INT PRIMARY KEY)"),
                sql("INSERT INTO p VALUES (1)"),
                sql("INSERT INTO p VALUES (1)"),
            ],
        ),
        case(
            "1299 not null",
            Data,
            &[
                sql("CREATE TABLE nn (v TEXT NOT NULL)"),
                sql("INSERT INTO nn VALUES (NULL)"),
            ],
        ),
        case(
            "275 check",
            Data,
            &[
                sql("CREATE TABLE ck (v INT CHECK (v > 0))"),
                sql("INSERT INTO ck VALUES (-1)"),
            ],
        ),
        case(
            "787 foreign key",
            Data,
            &[
                sql("PRAGMA foreign_keys = ON"),
                sql("CREATE TABLE fp (id INTEGER PRIMARY KEY)"),
                sql("CREATE TABLE fc (p INT REFERENCES fp (id))"),
                sql("INSERT INTO fc VALUES (5)"),
            ],
        ),
        case(
            "1811 a trigger rejects the row",
            Data,
            &[
                sql("CREATE TABLE tr (v TEXT)"),
                sql(
                    "CREATE TRIGGER reject BEFORE INSERT ON tr WHEN NEW.v = 'bad' \
                 BEGIN SELECT RAISE(ABORT, 'rejected'); END",
                ),
                sql("INSERT INTO tr VALUES ('bad')"),
            ],
        ),
        case(
            "3091 wrong type for a STRICT table",
            Data,
            &[
                sql("CREATE TABLE st (v INTEGER) STRICT"),
                sql("INSERT INTO st VALUES ('abc')"),
            ],
        ),
        case(
            "20 mismatch: not an integer for a rowid key",
            Data,
            &[
                sql("CREATE TABLE rk (id INTEGER PRIMARY KEY)"),
                sql("INSERT INTO rk VALUES ('abc')"),
            ],
        ),
        case("18 too big", Data, &[sql("SELECT zeroblob(2000000000)")]),
        case("1 too many columns", Data, &[sql(&wide)]),
        // The database, not the record: retried.
        case(
            "5 busy",
            Retriable,
            &[
                sql("CREATE TABLE b (id INT)"),
                ("#2", "BEGIN IMMEDIATE"),
                sql("PRAGMA busy_timeout = 0"),
                sql("INSERT INTO b VALUES (1)"),
            ],
        ),
        case(
            "13 full",
            Retriable,
            &[
                sql("CREATE TABLE f (v BLOB)"),
                sql("PRAGMA max_page_count = 1"),
                sql("INSERT INTO f VALUES (zeroblob(100000))"),
            ],
        ),
        case(
            "1 the table is gone",
            Retriable,
            &[sql("INSERT INTO gone VALUES (1)")],
        ),
        case(
            "1 the column is gone",
            Retriable,
            &[
                sql("CREATE TABLE dc (id INT)"),
                sql("INSERT INTO dc (id, gone) VALUES (1, 2)"),
            ],
        ),
        case(
            "517 busy snapshot (WAL)",
            Retriable,
            &[
                sql("PRAGMA journal_mode = WAL"),
                sql("CREATE TABLE w (id INT)"),
                ("#2", "BEGIN"),
                ("#2", "SELECT * FROM w"),
                sql("INSERT INTO w VALUES (1)"),
                ("#2", "INSERT INTO w VALUES (2)"),
            ],
        ),
        // Configuration, the file, bugs: fatal.
        case(
            "8 read-only",
            Fatal,
            &[
                sql("CREATE TABLE r (id INT)"),
                sql("PRAGMA query_only = 1"),
                sql("INSERT INTO r VALUES (1)"),
            ],
        ),
        case("26 not a database", Fatal, &[sql(&attach_garbage)]),
        case(
            "14 cannot open",
            Fatal,
            &[sql("ATTACH '/nonexistent/dir/x.db' AS n")],
        ),
        case("1 syntax error", Fatal, &[sql("INSERT INTO")]),
    ]
}

/// Through the sink: a table or column dropped behind its back is
/// retriable, and the retry puts it back; a record that the database
/// refuses for its shape (a field name, too many fields) is a data error,
/// and the task goes on writing the others.
async fn schema_errors(db: &Db) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut expect = |what: &str, result: Result<(), sluice_sdk::ConnectError>, kind| match result {
        Ok(()) => wrong.push(format!("{what}: written, expected a {kind} error")),
        Err(e) if e.kind != kind => wrong.push(format!(
            "{what}: {}, expected {kind} ({})",
            e.kind,
            e.full_message()
        )),
        Err(_) => {}
    };
    let t = db.table("behind");
    let cfg = [
        ("insert.mode", "insert"),
        ("pk.mode", "none"),
        ("auto.create", "true"),
        ("auto.evolve", "true"),
        ("table.name.format", t.as_str()),
    ];
    let mut sink = db.task(&cfg).await;
    let row = |o: i64| rec("b", o, None, Some(r#"{"n": 1, "v": "x"}"#));
    sink.put(vec![row(0)]).await.unwrap();
    db.rows(&format!("DROP TABLE {}", db.q(&t))).await;
    expect(
        "a dropped table",
        sink.put(vec![row(1)]).await,
        ErrorKind::Retriable,
    );
    sink.put(vec![row(1)]).await.unwrap();
    db.rows(&format!("ALTER TABLE {} DROP COLUMN v", db.q(&t)))
        .await;
    expect(
        "a dropped column",
        sink.put(vec![row(2)]).await,
        ErrorKind::Retriable,
    );
    sink.put(vec![row(2)]).await.unwrap();
    let count = db
        .rows(&format!("SELECT {} FROM {}", db.text("COUNT(*)"), db.q(&t)))
        .await;
    assert_eq!(count, strings(&[&["2"]]), "rows after the retries");

    // Fields the database refuses as columns.
    let mysql = db.mysql;
    let sqlite = db.url.starts_with("sqlite:");
    let too_many = if sqlite {
        2001
    } else if mysql {
        1100
    } else {
        1601
    };
    let wide: serde_json::Map<String, serde_json::Value> =
        (0..too_many).map(|i| (format!("f{i}"), 1.into())).collect();
    let wide = serde_json::Value::Object(wide).to_string();
    let long = format!(r#"{{"n": 1, "{}": 1}}"#, "x".repeat(70));
    let mut refused = vec![("too many fields for a new table", wide.as_str(), true)];
    if mysql {
        refused.extend([
            (
                "a field name with a trailing space",
                r#"{"n": 1, "a ": 1}"#,
                false,
            ),
            ("a field name over 64 characters", long.as_str(), false),
            (
                "two fields that differ in case",
                r#"{"n": 1, "a": 1, "A": 2}"#,
                true,
            ),
        ]);
    } else if !sqlite {
        refused.push((
            "a field named like a system column",
            r#"{"n": 1, "ctid": "x"}"#,
            false,
        ));
    }
    for (i, (what, value, new_table)) in refused.into_iter().enumerate() {
        let table = if new_table {
            db.table(&format!("refused{i}"))
        } else {
            t.clone()
        };
        let mut cfg = cfg;
        cfg[4] = ("table.name.format", table.as_str());
        let mut sink = db.task(&cfg).await;
        expect(
            what,
            sink.put(vec![rec("b", 10, None, Some(value))]).await,
            ErrorKind::Data,
        );
        sink.put(vec![row(11)]).await.unwrap();
        sink.stop().await;
    }

    if !mysql && !sqlite {
        // Keys the sink sees as two and PostgreSQL as one: a data error
        // for the batch; split, both are written, the last one winning.
        let t = db.table("instants");
        db.rows(&format!(
            "CREATE TABLE {} (at TIMESTAMPTZ PRIMARY KEY, v TEXT)",
            db.q(&t)
        ))
        .await;
        let mut sink = db
            .task(&[
                ("insert.mode", "upsert"),
                ("pk.mode", "record_value"),
                ("pk.fields", "at"),
                ("table.name.format", t.as_str()),
            ])
            .await;
        let a = rec(
            "i",
            0,
            None,
            Some(r#"{"at": "2026-01-01T00:00:00Z", "v": "a"}"#),
        );
        let b = rec(
            "i",
            1,
            None,
            Some(r#"{"at": "2026-01-01T01:00:00+01:00", "v": "b"}"#),
        );
        expect(
            "one upsert meeting a key twice",
            sink.put(vec![a.clone(), b.clone()]).await,
            ErrorKind::Data,
        );
        sink.put(vec![a]).await.unwrap();
        sink.put(vec![b]).await.unwrap();
        assert_eq!(
            db.rows(&format!("SELECT v FROM {}", db.q(&t))).await,
            strings(&[&["b"]])
        );
        sink.stop().await;
    }
    sink.stop().await;
    wrong
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_errors_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("errors.db").display());
    let mut wrong = misclassified(&url, sqlite_cases(dir.path())).await;
    let db = Db {
        url: format!("sqlite:{}", dir.path().join("sink.db").display()),
        mysql: false,
        prefix: String::new(),
    };
    wrong.extend(schema_errors(&db).await);
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_errors_on_postgres() {
    let Some(pg) = PgInstance::start() else {
        return;
    };
    let db = Db {
        url: pg.url(),
        mysql: false,
        prefix: "s_".into(),
    };
    let mut wrong = misclassified(&db.url, postgres_cases()).await;
    wrong.extend(schema_errors(&db).await);
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_errors_on_mariadb() {
    let Some(maria) = MariaDbInstance::start() else {
        return;
    };
    let db = Db {
        url: maria.url(),
        mysql: true,
        prefix: "s_".into(),
    };
    let mut wrong = misclassified(&db.url, mariadb_cases()).await;
    wrong.extend(schema_errors(&db).await);
    assert!(wrong.is_empty(), "misclassified:\n{}", wrong.join("\n"));
}
