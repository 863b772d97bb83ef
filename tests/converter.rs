//! `JsonConverter` with `schemas.enable=true` end to end, on the embedded
//! broker: a source writes envelopes, a stream carries the schema through
//! a WASM transform and evolves it, malformed envelopes are dead-lettered
//! with their context. (Byte compatibility with Kafka Connect itself:
//! `compat_converter.rs`; the JDBC sink's columns from schemas: `jdbc.rs`.)

use std::time::Duration;

use rdkafka::Message;
use rdkafka::message::OwnedMessage;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};

use crate::fixtures::{self, InProcess, header};

/// Writes raw records (a `None` value is a tombstone).
async fn send(bootstrap: &str, topic: &str, records: &[(&str, Option<&[u8]>)]) {
    let producer: FutureProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    for (key, value) in records {
        let mut r: FutureRecord<'_, str, [u8]> = FutureRecord::to(topic).key(*key).partition(0);
        if let Some(v) = value {
            r = r.payload(*v);
        }
        producer
            .send(r, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
}

async fn read_at_least(env: &InProcess, topic: &str, n: usize) -> Vec<OwnedMessage> {
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let topic = topic.to_string();
    fixtures::eventually(Duration::from_secs(120), "records in the topic", || {
        let (bootstrap, topic) = (bootstrap.clone(), topic.clone());
        async move {
            let r = tokio::task::spawn_blocking(move || fixtures::read_topic(&bootstrap, &topic))
                .await
                .ok()?;
            (r.len() >= n).then_some(r)
        }
    })
    .await
}

fn text(b: Option<&[u8]>) -> Option<String> {
    b.map(|b| String::from_utf8(b.to_vec()).unwrap())
}

const ORDER_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"order_id"},{"type":"string","optional":false,"field":"status"},{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},"field":"amount"},{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1,"field":"placed"},{"type":"array","items":{"type":"string","optional":false},"optional":true,"field":"tags"}],"optional":false,"name":"shop.Order","version":1}"#;

fn order(payload: &str) -> Vec<u8> {
    format!(r#"{{"schema":{ORDER_SCHEMA},"payload":{payload}}}"#).into_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_carries_the_schema_through_a_transform_and_evolves_it() {
    let env = InProcess::start();
    env.broker.create_topic("orders", 1).await.unwrap();
    let good = order(
        r#"{"order_id":1,"status":"paid","amount":"MDk=","placed":1704067200123,"tags":["a","b"]}"#,
    );
    // 12345678901234567890.12, only exact through an exact decimal.
    let big =
        order(r#"{"order_id":2,"status":"new","amount":"Qu0SOwvYIDoU","placed":0,"tags":null}"#);
    let malformed = order(r#"{"order_id":"three","status":"x","amount":"AA==","placed":0}"#);
    let not_envelope = br#"{"order_id":4,"status":"paid"}"#.to_vec();
    send(
        env.broker.bootstrap_servers(),
        "orders",
        &[
            ("k1", Some(&good)),
            ("k2", Some(&big)),
            ("k3", Some(&malformed)),
            ("k4", Some(&not_envelope)),
            ("k5", None),
        ],
    )
    .await;
    env.create(json!({"name": "enrich", "config": {
        "connector.class": "stream", "topics": "orders", "output.topic": "${topic}.out",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "transforms": "ref", "transforms.ref.type": "wasm",
        "transforms.ref.module": fixtures::example_component().display().to_string(),
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "orders-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }}))
    .await;

    // And a copy with no transform: what it reads, it writes the same.
    env.create(json!({"name": "copy", "config": {
        "connector.class": "stream", "topics": "orders", "output.topic": "${topic}.copy",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "errors.tolerance": "all",
    }}))
    .await;

    let out = read_at_least(&env, "orders.out", 3).await;
    assert_eq!(out.len(), 3, "two orders and the tombstone");
    let evolved = ORDER_SCHEMA.replace(
        r#"],"optional":false,"name":"shop.Order""#,
        r#",{"type":"string","optional":true,"field":"processed_by"}],"optional":false,"name":"shop.Order""#,
    );
    // The transform upper-cased `status` and added `processed_by`: every
    // field the input had keeps its schema (the Decimal, the Timestamp,
    // the struct's name and version), the new one is an optional string.
    assert_eq!(
        text(out[0].payload()).unwrap(),
        format!(
            r#"{{"schema":{evolved},"payload":{{"order_id":1,"status":"PAID","amount":"MDk=","placed":1704067200123,"tags":["a","b"],"processed_by":"sluice"}}}}"#
        )
    );
    assert_eq!(out[0].key(), Some(&b"k1"[..]), "keys pass as they are");
    // The reference transform reads numbers as doubles: a 22-digit
    // decimal comes back rounded to 17 digits (the transform's doing,
    // README "Converters"), still in the schema's scale.
    assert_eq!(
        text(out[1].payload()).unwrap(),
        format!(
            r#"{{"schema":{evolved},"payload":{{"order_id":2,"status":"NEW","amount":"Qu0SOwvYHt5g","placed":0,"tags":null,"processed_by":"sluice"}}}}"#
        )
    );
    // Without a transform, every digit is kept: the same bytes.
    let copy = read_at_least(&env, "orders.copy", 3).await;
    assert_eq!(copy[0].payload(), Some(&good[..]));
    assert_eq!(copy[1].payload(), Some(&big[..]));
    assert_eq!(copy[2].payload(), None);
    assert_eq!(out[2].payload(), None, "a tombstone stays a tombstone");
    assert_eq!(out[2].key(), Some(&b"k5"[..]));

    // The two that are not envelopes of their schema, dead-lettered as
    // they were consumed, with the converter stage and the reason.
    let dlq = read_at_least(&env, "orders-dlq", 2).await;
    let letters: Vec<(Option<Vec<u8>>, String, String, String)> = dlq
        .iter()
        .map(|m| {
            (
                m.payload().map(<[u8]>::to_vec),
                header(m, "__connect.errors.stage").unwrap(),
                header(m, "x-dead-letter-error-class").unwrap(),
                header(m, "__connect.errors.exception.message").unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(letters[0].0.as_deref(), Some(&malformed[..]));
    assert_eq!(
        (letters[0].1.as_str(), letters[0].2.as_str()),
        ("VALUE_CONVERTER", "SchemaMismatch")
    );
    assert!(
        letters[0]
            .3
            .contains("payload.order_id: a string where the schema has `int64`"),
        "{}",
        letters[0].3
    );
    assert_eq!(letters[1].0.as_deref(), Some(&not_envelope[..]));
    assert_eq!(
        (letters[1].1.as_str(), letters[1].2.as_str()),
        ("VALUE_CONVERTER", "NotAnEnvelope")
    );
    assert_eq!(
        header(&dlq[1], "__connect.errors.class.name").as_deref(),
        Some("org.apache.kafka.connect.json.JsonConverter")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn datagen_writes_envelopes_of_its_schema() {
    let env = InProcess::start();
    env.broker.create_topic("gen", 1).await.unwrap();
    env.create(json!({"name": "gen", "config": {
        "connector.class": "datagen", "topic": "gen", "count": "3", "rate": "0",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }}))
    .await;
    let records = read_at_least(&env, "gen", 3).await;
    let first: Value = serde_json::from_slice(records[0].payload().unwrap()).unwrap();
    assert_eq!(
        first["schema"],
        json!({"type": "struct", "fields": [
            {"type": "int64", "optional": false, "field": "order_id"},
            {"type": "string", "optional": false, "field": "customer_id"},
            {"type": "double", "optional": false, "field": "amount"},
            {"type": "string", "optional": false, "field": "currency"},
            {"type": "string", "optional": false, "field": "status"},
            {"type": "string", "optional": false, "field": "updated_at"},
        ], "optional": false})
    );
    assert_eq!(first["payload"]["order_id"], 1);
    assert_eq!(
        text(records[0].key()).unwrap(),
        r#"{"schema":{"type":"int64","optional":false},"payload":1}"#
    );
    // A double is written as Java writes it: always with a point.
    let raw = text(records[0].payload()).unwrap();
    let amount = first["payload"]["amount"].as_f64().unwrap();
    assert!(
        raw.contains(&format!(r#""amount":{amount:?}"#)),
        "{raw} has the amount as Java writes {amount:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jdbc_sink_reads_envelopes_into_typed_columns() {
    let Some(url) = crate::postgres::postgres_url() else {
        return;
    };
    let table = format!("enveloped_{}", std::process::id());
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
    let env = InProcess::start();
    env.broker.create_topic("pg-enveloped", 1).await.unwrap();
    let big = order(
        r#"{"order_id":2,"status":"new","amount":"Qu0SOwvYIDoU","placed":1704067200123,"tags":null}"#,
    );
    let small = order(r#"{"order_id":1,"status":"paid","amount":"MDk=","placed":0,"tags":["a"]}"#);
    send(
        env.broker.bootstrap_servers(),
        "pg-enveloped",
        &[("k1", Some(&small)), ("k2", Some(&big))],
    )
    .await;
    env.create(json!({"name": "pg-enveloped", "config": {
        "connector.class": "jdbc-sink", "topics": "pg-enveloped", "connection.url": url.clone(),
        "table.name.format": table.clone(),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id",
        "auto.create": "true",
    }}))
    .await;
    let select = format!(
        r#"SELECT order_id::text, status, amount::text, (placed AT TIME ZONE 'UTC')::text, tags::text FROM "{table}" ORDER BY order_id"#
    );
    let rows = fixtures::db_rows_once(&url, &table, &select, 2).await;
    // Every digit of the Decimal, the Timestamp as an instant
    // (TIMESTAMPTZ), the array as JSONB.
    assert_eq!(
        rows,
        vec![
            vec!["1", "paid", "123.45", "1970-01-01 00:00:00", r#"["a"]"#],
            vec![
                "2",
                "new",
                "12345678901234567890.12",
                "2024-01-01 00:00:00.123",
                "NULL"
            ],
        ]
    );
    let types = fixtures::db_rows(
        &url,
        &format!(
            "SELECT column_name::text, data_type::text, is_nullable::text FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position"
        ),
    )
    .await;
    assert_eq!(
        types,
        vec![
            vec!["order_id", "bigint", "NO"],
            vec!["status", "text", "NO"],
            vec!["amount", "numeric", "NO"],
            vec!["placed", "timestamp with time zone", "NO"],
            vec!["tags", "jsonb", "YES"],
        ]
    );
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
}
