//! The JDBC sink against SQLite, a real PostgreSQL and a real MariaDB: the
//! same scenarios on each (insert modes, key modes, auto.create and
//! auto.evolve, deletes, the upsert guard, quoting, a bad row, and the
//! exactly-once transaction with its offsets table).

use sluice_connector_jdbc::JdbcSinkConnector;
use sluice_sdk::{
    CommitOffset, ConfigMap, ErrorKind, PartitionOffset, Record, SinkConnector, SinkTask,
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
    let cfg = [
        ("insert.mode", "insert"),
        ("pk.mode", "none"),
        ("table.name.format", t.as_str()),
        ("offsets.table.name", offsets.as_str()),
    ];
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
