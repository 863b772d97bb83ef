use super::*;
use sluice_sdk::ErrorKind;
use sqlx::Row as _;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

fn config(db: &std::path::Path, extra: &[(&str, &str)]) -> ConfigMap {
    let mut c: ConfigMap = [(
        "connection.url".to_string(),
        format!("jdbc:sqlite:{}", db.display()),
    )]
    .into();
    for (k, v) in extra {
        c.insert(k.to_string(), v.to_string());
    }
    c
}

fn record(topic: &str, offset: i64, key: &str, value: &str) -> Record {
    Record {
        topic: topic.into(),
        partition: 0,
        offset,
        key: Some(key.as_bytes().to_vec()),
        value: Some(value.as_bytes().to_vec()),
        ..Default::default()
    }
}

async fn task(cfg: &ConfigMap) -> Box<dyn SinkTask> {
    let ctx = TaskContext {
        connector: "jdbc".into(),
        task_id: 0,
        ..Default::default()
    };
    let mut t = JdbcSinkConnector.create_task(cfg, ctx).unwrap();
    t.start().await.unwrap();
    t
}

async fn rows(db: &std::path::Path, sql: &str) -> Vec<Vec<String>> {
    let pool = SqlitePoolOptions::new()
        .connect_with(SqliteConnectOptions::new().filename(db))
        .await
        .unwrap();
    let rows = sqlx::query(sql).fetch_all(&pool).await.unwrap();
    rows.iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    r.try_get::<Option<String>, _>(i)
                        .or_else(|_| {
                            r.try_get::<Option<i64>, _>(i)
                                .map(|v| v.map(|v| v.to_string()))
                        })
                        .or_else(|_| {
                            r.try_get::<Option<f64>, _>(i)
                                .map(|v| v.map(|v| v.to_string()))
                        })
                        .unwrap()
                        .unwrap_or_else(|| "NULL".into())
                })
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn upsert_by_record_key_is_idempotent_and_last_wins() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let cfg = config(
        &db,
        &[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "order_id"),
            ("auto.create", "true"),
        ],
    );
    let mut t = task(&cfg).await;
    let batch = vec![
        record(
            "orders",
            0,
            "1",
            r#"{"amount": 10.5, "status": "paid", "meta": {"a": 1}}"#,
        ),
        record("orders", 1, "2", r#"{"amount": 3, "status": "new"}"#),
        record("orders", 2, "1", r#"{"amount": 11.0, "status": "shipped"}"#),
    ];
    t.put(batch.clone()).await.unwrap();
    // Replaying the same batch changes nothing.
    t.put(batch).await.unwrap();
    let got = rows(
        &db,
        "SELECT order_id, amount, status FROM orders ORDER BY order_id",
    )
    .await;
    assert_eq!(
        got,
        vec![
            // The batch is de-duplicated by key first: only the last record
            // for key 1 is written (and its table made from what is written:
            // no `meta` column).
            vec!["1".to_string(), "11".into(), "shipped".into()],
            vec!["2".to_string(), "3".into(), "new".into()],
        ]
    );
    let columns = rows(&db, "SELECT name FROM pragma_table_info('orders')").await;
    assert!(!columns.iter().any(|c| c[0] == "meta"), "{columns:?}");
}

#[tokio::test]
async fn kafka_pk_and_quoted_identifiers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let cfg = config(
        &db,
        &[
            ("pk.mode", "kafka"),
            ("auto.create", "true"),
            ("table.name.format", "${topic}"),
        ],
    );
    let mut t = task(&cfg).await;
    t.put(vec![record(
        "order",
        7,
        "k",
        r#"{"Select": "x", "from": 1}"#,
    )])
    .await
    .unwrap();
    let got = rows(
        &db,
        r#"SELECT __connect_topic, __connect_offset, "Select", "from" FROM "order""#,
    )
    .await;
    assert_eq!(
        got,
        vec![vec![
            "order".to_string(),
            "7".into(),
            "x".into(),
            "1".into()
        ]]
    );
    // insert mode: the same offset again violates the primary key: a data error.
    let err = t
        .put(vec![record(
            "order",
            7,
            "k",
            r#"{"Select": "y", "from": 2}"#,
        )])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data, "{}", err.full_message());
}

#[tokio::test]
async fn bad_records_are_data_errors_and_missing_tables_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let cfg = config(
        &db,
        &[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "id"),
            ("auto.create", "true"),
        ],
    );
    let mut t = task(&cfg).await;
    for (value, needle) in [
        ("{not json", "not JSON"),
        ("[1,2]", "not an object"),
        (r#"{"x": 1}"#, "primary-key field `id`"),
    ] {
        let err = t.put(vec![record("t", 0, "k", value)]).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::Data);
        assert!(
            err.message.contains(needle),
            "{} lacks {needle}",
            err.message
        );
    }
    let cfg = config(&db, &[("insert.mode", "insert")]);
    let mut t = task(&cfg).await;
    let err = t
        .put(vec![record("absent", 0, "k", r#"{"id": 1}"#)])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Fatal);
    assert!(err.message.contains("auto.create"), "{}", err.message);
}

#[test]
fn config_errors_name_the_key() {
    let dir = std::path::Path::new("/tmp");
    let err = JdbcSinkConfig::parse(&config(dir, &[("insert.mode", "upsert")])).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("pk.mode"));
    let err = JdbcSinkConfig::parse(&config(dir, &[("insert.mode", "merge")])).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("insert.mode"));
    let err = JdbcSinkConfig::parse(&config(dir, &[("max.retries", "3")])).unwrap_err();
    assert_eq!(err.key.as_deref(), Some("max.retries"));
}

/// A record whose topic maps onto the offsets table (`table.name.format`
/// `${topic}`, topic `sluice_offsets`) would overwrite the stored offsets:
/// it is a data error of that record, and the offsets stay.
#[tokio::test]
async fn a_topic_that_maps_onto_the_offsets_table_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let cfg = config(
        &db,
        &[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "connector,topic,partition"),
            ("auto.create", "true"),
        ],
    );
    let mut t = task(&cfg).await;
    t.begin().await.unwrap();
    t.commit(&[sluice_sdk::CommitOffset {
        topic: "orders".into(),
        partition: 0,
        first: 0,
        next: 10,
    }])
    .await
    .unwrap();
    let forged = r#"{"connector": "jdbc", "topic": "orders", "partition": 0, "offset": 0}"#;
    let err = t
        .put(vec![record("sluice_offsets", 0, "k", forged)])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::Data);
    assert!(err.message.contains("offsets table"), "{}", err.message);
    let stored = t.stored_offsets(&[("orders".into(), 0)]).await.unwrap();
    assert_eq!(stored[0].offset, 10, "the stored offset is untouched");
}

/// Debezium writes a tombstone after the delete of a row of a table
/// without a key: null key, null value. It names no row, so there is
/// nothing to delete; the delete event before it did the work.
#[tokio::test]
async fn a_tombstone_without_a_key_deletes_nothing_and_fails_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let cfg = config(
        &db,
        &[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_key"),
            ("pk.fields", "id"),
            ("delete.enabled", "true"),
            ("auto.create", "true"),
        ],
    );
    let mut t = task(&cfg).await;
    let keyless_tombstone = Record {
        topic: "rows".into(),
        partition: 0,
        offset: 1,
        key: None,
        value: None,
        ..Default::default()
    };
    t.put(vec![
        record("rows", 0, "1", r#"{"v": "kept"}"#),
        keyless_tombstone,
    ])
    .await
    .unwrap();
    assert_eq!(
        rows(&db, "SELECT id, v FROM rows").await,
        vec![vec!["1".to_string(), "kept".into()]]
    );
}
