//! Confluent's `AvroConverter`, `JsonSchemaConverter` and
//! `ProtobufConverter` and the worker's
//! built-in schema registry, checked with Confluent's own Python client
//! (`confluent-kafka` from PyPI, installed by `scripts/confluent-py.sh`):
//! its serializers write records a Sluice sink reads into typed PostgreSQL
//! columns, its deserializers read what a Sluice source wrote, and its
//! `SchemaRegistryClient` registers, looks up and is refused schemas by
//! compatibility on the worker's `/schema-registry`.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::fixtures::{self, InProcess};

/// The venv's python with confluent-kafka; the test cannot run without it
/// and says so.
fn confluent_python() -> String {
    let out = Command::new(fixtures::repo_root().join("scripts/confluent-py.sh"))
        .arg("python")
        .output()
        .expect("running scripts/confluent-py.sh");
    assert!(
        out.status.success(),
        "confluent-kafka could not be installed (scripts/confluent-py.sh): the schema registry checks cannot run:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs tests/schema_registry/confluent_avro.py; its stdout.
async fn confluent(args: &[&str]) -> String {
    match try_confluent(args).await {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    }
}

/// Runs tests/schema_registry/confluent_json_schema.py; its stdout.
async fn confluent_json(args: &[&str]) -> String {
    match try_python("confluent_json_schema.py", args).await {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    }
}

/// Runs tests/schema_registry/confluent_protobuf.py; its stdout.
async fn confluent_protobuf(args: &[&str]) -> String {
    match try_python("confluent_protobuf.py", args).await {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    }
}

/// The Avro script; its stdout, or what it printed when it failed.
async fn try_confluent(args: &[&str]) -> Result<String, String> {
    try_python("confluent_avro.py", args).await
}

/// A script of tests/schema_registry/ with confluent-kafka; its stdout, or
/// what it printed when it failed.
async fn try_python(name: &str, args: &[&str]) -> Result<String, String> {
    let python = confluent_python();
    let script = fixtures::repo_root()
        .join("tests/schema_registry")
        .join(name);
    let name = name.to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(Path::new(&script))
            .args(&args)
            .output()
            .expect("running a confluent-kafka script")
    })
    .await
    .unwrap();
    if !out.status.success() {
        return Err(format!(
            "{name} failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8(out.stdout).unwrap())
}

/// A connector's status, for a failure's message.
async fn status(registry: &str, name: &str) -> String {
    let base = registry.trim_end_matches("/schema-registry");
    match reqwest::get(format!("{base}/connectors/{name}/status")).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(e) => e.to_string(),
    }
}

/// The latest version of `subject` as the registry answers it.
async fn latest_version(registry: &str, subject: &str) -> Value {
    reqwest::get(format!("{registry}/subjects/{subject}/versions/latest"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The latest version of `subject` as the registry answers it, and its
/// schema parsed (a JSON schema: Avro or JSON Schema).
async fn latest_schema(registry: &str, subject: &str) -> (Value, Value) {
    let latest = latest_version(registry, subject).await;
    let schema = serde_json::from_str(latest["schema"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the latest schema of {subject} is not JSON ({e}): {latest}"));
    (latest, schema)
}

/// The first `n` records of a dead-letter queue: for each, the failing
/// class, the error's class and its message, from the context headers.
async fn dead_letter_reasons(
    bootstrap: &str,
    dlq: &str,
    n: usize,
) -> Vec<(String, String, String)> {
    fixtures::topic_records(bootstrap, dlq, n, "the bad records dead-lettered")
        .await
        .iter()
        .map(|m| {
            let header = |k: &str| fixtures::header(m, k).unwrap_or_default();
            (
                header("__connect.errors.class.name"),
                header("x-dead-letter-error-class"),
                header("__connect.errors.exception.message"),
            )
        })
        .collect()
}

/// The worker's REST API over mutual TLS (`tls.server`) on a port of its
/// own: the registry's URL, and the token that stops it.
async fn serve_mutual_tls(
    env: &InProcess,
    tls: &MutualTls,
) -> (String, tokio_util::sync::CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = sluice_runtime::tls::acceptor(&tls.server).unwrap();
    let app = sluice_runtime::rest::router(env.herder.clone());
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(sluice_runtime::tls::serve(
        listener,
        acceptor,
        app,
        stop.clone(),
    ));
    (format!("https://localhost:{port}/schema-registry"), stop)
}

/// The worker's REST API on a port of its own; the registry's URL.
async fn serve(env: &InProcess) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://127.0.0.1:{port}/schema-registry")
}

#[tokio::test(flavor = "multi_thread")]
async fn confluents_serializer_feeds_a_jdbc_sink_through_the_builtin_registry() {
    let Some(url) = crate::postgres::postgres_url() else {
        return;
    };
    let table = format!("avro_orders_{}", std::process::id());
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("avro-orders", 1).await.unwrap();
    env.broker.create_topic("avro-orders-dlq", 1).await.unwrap();
    confluent(&["produce", &bootstrap, &registry, "avro-orders", "4"]).await;
    // Not in Confluent's wire format: dead-lettered with its reason.
    fixtures::produce(
        &bootstrap,
        "avro-orders",
        &[(Some("poison"), b"{\"id\": 5}")],
    )
    .await;
    env.create(json!({"name": "avro-sink", "config": {
        "connector.class": "jdbc-sink", "topics": "avro-orders", "connection.url": url.clone(),
        "table.name.format": table.clone(),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "auto.create": "true",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "avro-orders-dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
    }}))
    .await;
    let select = format!(
        r#"SELECT id::text, name, amount::text, (placed AT TIME ZONE 'UTC')::text, day::text, note FROM "{table}" ORDER BY id"#
    );
    let rows = fixtures::db_rows_once(&url, &table, &select, 4).await;
    // The decimal to the cent (a double would round it), the timestamp to
    // the millisecond, the date, the optional field.
    assert_eq!(
        rows,
        vec![
            vec![
                "1",
                "order-1 é",
                "12345678901234568.89",
                "2024-01-01 00:00:01.123",
                "2024-02-29",
                "NULL"
            ],
            vec![
                "2",
                "order-2 é",
                "12345678901234569.89",
                "2024-01-01 00:00:02.123",
                "2024-02-29",
                "note 2"
            ],
            vec![
                "3",
                "order-3 é",
                "12345678901234570.89",
                "2024-01-01 00:00:03.123",
                "2024-02-29",
                "NULL"
            ],
            vec![
                "4",
                "order-4 é",
                "12345678901234571.89",
                "2024-01-01 00:00:04.123",
                "2024-02-29",
                "note 4"
            ],
        ]
    );
    let types = fixtures::db_rows(
        &url,
        &format!(
            "SELECT column_name::text, data_type::text, is_nullable::text, coalesce(numeric_precision::text || ',' || numeric_scale::text, '') FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position"
        ),
    )
    .await;
    assert_eq!(
        types,
        vec![
            vec!["id", "bigint", "NO", "64,0"],
            vec!["name", "text", "NO", ""],
            // The Avro decimal's precision and scale.
            vec!["amount", "numeric", "NO", "20,2"],
            vec!["placed", "timestamp with time zone", "NO", ""],
            vec!["day", "date", "NO", ""],
            vec!["note", "text", "YES", ""],
        ]
    );
    let dead = fixtures::topic_records(
        &bootstrap,
        "avro-orders-dlq",
        1,
        "the poison record dead-lettered",
    )
    .await;
    use rdkafka::Message;
    use rdkafka::message::Headers;
    let headers: Vec<(String, String)> = dead[0]
        .headers()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h.key.to_string(),
                String::from_utf8_lossy(h.value.unwrap_or_default()).into_owned(),
            )
        })
        .collect();
    let header = |k: &str| headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(dead[0].payload(), Some(&b"{\"id\": 5}"[..]));
    assert_eq!(
        (
            header("__connect.errors.class.name").as_deref(),
            header("__connect.errors.stage").as_deref(),
            header("x-dead-letter-error-class").as_deref(),
        ),
        (
            Some("io.confluent.connect.avro.AvroConverter"),
            Some("VALUE_CONVERTER"),
            Some("UnknownMagicByte"),
        ),
        "{headers:?}"
    );
    assert!(
        header("__connect.errors.exception.message")
            .unwrap_or_default()
            .contains("Confluent's wire format"),
        "{headers:?}"
    );
    // The serializer registered its schema under TopicNameStrategy's subject.
    let subjects: Value = reqwest::get(format!("{registry}/subjects"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(subjects, json!(["avro-orders-value"]));
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn confluents_deserializer_reads_what_a_source_wrote() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("avro-datagen", 1).await.unwrap();
    env.create(json!({"name": "avro-source", "config": {
        "connector.class": "datagen", "topic": "avro-datagen", "count": "25", "rate": "0",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
    }}))
    .await;
    let out = confluent(&["consume", &bootstrap, &registry, "avro-datagen", "25"]).await;
    let values: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), 25);
    let ids: std::collections::BTreeSet<u64> = values
        .iter()
        .map(|v| v["schema_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "one schema for every record: {ids:?}");
    for v in &values {
        let fields: Vec<&str> = v["value"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = vec![
            "amount",
            "currency",
            "customer_id",
            "order_id",
            "status",
            "updated_at",
        ];
        let mut got = fields.clone();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "{v}");
        assert!(v["value"]["order_id"].is_i64(), "{v}");
        assert!(v["value"]["amount"].is_f64(), "{v}");
    }
    // What the converter registered: a record Confluent's converter would
    // write, under the topic's value subject.
    let (latest, schema) = latest_schema(&registry, "avro-datagen-value").await;
    assert_eq!(latest["version"], 1, "{latest}");
    assert_eq!(schema["type"], "record", "{schema}");
    assert_eq!(
        schema["fields"][0],
        json!({"name": "order_id", "type": "long"}),
        "{schema}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn confluents_registry_client_gets_confluents_answers() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let out = confluent(&["registry", &registry, "orders-value"]).await;
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["v1_id"], 1, "{r}");
    assert_eq!(
        r["v1_again_id"], 1,
        "the same schema, spaced differently: {r}"
    );
    assert_eq!(r["optional_added_compatible"], true, "{r}");
    assert_eq!(r["v2_id"], 2, "{r}");
    assert_eq!(r["required_added_compatible"], false, "{r}");
    assert_eq!(
        r["required_added"],
        json!({"status": 409, "code": 409}),
        "BACKWARD by default: {r}"
    );
    assert_eq!(r["latest"], json!({"version": 2, "id": 2}), "{r}");
    assert_eq!(r["versions"], json!([1, 2]), "{r}");
    assert_eq!(r["by_id_has_extra"], true, "{r}");
    assert_eq!(r["lookup_v1"], json!({"version": 1, "id": 1}), "{r}");
    assert_eq!(r["subjects"], json!(["orders-value"]), "{r}");
    assert_eq!(r["set_none"], json!({"compatibility": "NONE"}), "{r}");
    assert_eq!(r["required_after_none_id"], 3, "{r}");
    assert_eq!(
        r["missing_id"],
        json!({"status": 404, "code": 40403}),
        "{r}"
    );
}

/// Soft and permanent deletes with Confluent's client: what a soft delete
/// hides, what a permanent one needs first, Confluent's codes, ids that
/// keep naming their schemas.
#[tokio::test(flavor = "multi_thread")]
async fn confluents_registry_client_deletes_softly_then_for_good() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let out = confluent(&["deletes", &registry, "gone-value"]).await;
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["ids"], json!([1, 2]), "{r}");
    assert_eq!(
        r["hard_before_soft"],
        json!({"status": 404, "code": 40407}),
        "{r}"
    );
    assert_eq!(r["soft_v2"], 2, "{r}");
    assert_eq!(
        r["soft_v2_again"],
        json!({"status": 404, "code": 40406}),
        "{r}"
    );
    assert_eq!(r["versions"], json!([1]), "{r}");
    assert_eq!(r["versions_with_deleted"], json!([1, 2]), "{r}");
    assert_eq!(r["latest_after_soft"], 1, "{r}");
    assert_eq!(
        r["v2_by_version"],
        json!({"status": 404, "code": 40402}),
        "{r}"
    );
    assert_eq!(r["v2_by_version_deleted"], 2, "{r}");
    assert_eq!(r["v2_id_still_served"], true, "{r}");
    assert_eq!(r["hard_v2"], 2, "{r}");
    assert_eq!(r["versions_after_hard"], json!([1]), "{r}");
    assert_eq!(r["soft_subject"], json!([1]), "{r}");
    assert_eq!(r["subjects"], json!([]), "{r}");
    assert_eq!(r["subjects_with_deleted"], json!(["gone-value"]), "{r}");
    assert_eq!(
        r["versions_of_deleted_subject"],
        json!({"status": 404, "code": 40401}),
        "{r}"
    );
    assert_eq!(r["hard_subject"], json!([1]), "{r}");
    assert_eq!(r["subjects_after_hard"], json!([]), "{r}");
    assert_eq!(r["registered_again"], 1, "the id is the schema's: {r}");
    assert_eq!(r["version_again"], 1, "{r}");
}

/// A WASM transform between Avro in and Avro out: it sees the record as
/// JSON, and its output is written with the schema followed from the
/// input's: unchanged fields keep their Avro types, the added one is an
/// optional string, registered under the output topic's subject.
#[tokio::test(flavor = "multi_thread")]
async fn a_transforms_output_is_written_with_an_evolved_registered_schema() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("avro-in", 1).await.unwrap();
    env.broker.create_topic("avro-in.out", 1).await.unwrap();
    confluent(&["produce", &bootstrap, &registry, "avro-in", "3"]).await;
    env.create(json!({"name": "avro-stream", "config": {
        "connector.class": "stream", "topics": "avro-in", "output.topic": "${topic}.out",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "transforms": "ref", "transforms.ref.type": "wasm",
        "transforms.ref.module": fixtures::example_component().display().to_string(),
        "transforms.ref.uppercase.field": "name",
    }}))
    .await;
    let out = match try_confluent(&["consume", &bootstrap, &registry, "avro-in.out", "3"]).await {
        Ok(out) => out,
        Err(e) => panic!(
            "{e}\nthe stream: {}",
            status(&registry, "avro-stream").await
        ),
    };
    let values: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), 3);
    for (i, v) in values.iter().enumerate() {
        let n = i + 1;
        let value = &v["value"];
        assert_eq!(value["id"], n, "{v}");
        assert_eq!(value["name"], format!("ORDER-{n} É"), "{v}");
        assert_eq!(value["processed_by"], "sluice", "{v}");
        // Still a timestamp and a date to Confluent's deserializer.
        assert_eq!(
            value["placed"],
            format!("2024-01-01T00:00:0{n}.123000+00:00"),
            "{v}"
        );
        assert_eq!(value["day"], "2024-02-29", "{v}");
        // The reference transform reads numbers as doubles: 17 digits
        // kept, still a decimal of scale 2.
        let amount = value["amount"].as_str().unwrap();
        assert!(
            amount.starts_with("123456789012345") && amount.ends_with(".00"),
            "{v}"
        );
    }
    let (_, schema) = latest_schema(&registry, "avro-in.out-value").await;
    let fields = schema["fields"].as_array().unwrap();
    let field = |name: &str| {
        fields
            .iter()
            .find(|f| f["name"] == name)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(schema["name"], "Order", "{schema}");
    assert_eq!(schema["namespace"], "shop", "{schema}");
    assert_eq!(
        field("amount")["type"]["logicalType"],
        "decimal",
        "{schema}"
    );
    assert_eq!(
        field("placed")["type"]["logicalType"],
        "timestamp-millis",
        "{schema}"
    );
    assert_eq!(
        field("processed_by")["type"],
        json!(["null", "string"]),
        "{schema}"
    );
}

/// `schema.registry.url` names an external registry: here the worker's own
/// API over HTTP, after a URL where nothing listens, so the converter's
/// HTTP client, its failover to the next URL and Confluent's answers are
/// what carry the schemas.
#[tokio::test(flavor = "multi_thread")]
async fn an_external_registry_is_reached_over_http_past_a_dead_url() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("avro-external", 1).await.unwrap();
    let dead = format!("http://127.0.0.1:{}", fixtures::free_port());
    env.create(json!({"name": "avro-external", "config": {
        "connector.class": "datagen", "topic": "avro-external", "count": "5", "rate": "0",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": format!("{dead},{registry}"),
        "value.converter.value.subject.name.strategy":
            "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    }}))
    .await;
    let out = confluent(&["consume", &bootstrap, &registry, "avro-external", "5"]).await;
    assert_eq!(out.lines().count(), 5, "{out}");
    // RecordNameStrategy: the subject is the record's name.
    let subjects: Value = reqwest::get(format!("{registry}/subjects"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = subjects
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(names.len(), 1, "{subjects}");
    // datagen's struct has no name: Confluent's default record name.
    assert_eq!(
        names,
        vec!["io.confluent.connect.avro.ConnectDefault"],
        "{subjects}"
    );
}

/// Confluent's `JSONSerializer` (validating, with a schema as users write
/// them) feeds a PostgreSQL sink through `JsonSchemaConverter`: typed
/// columns from the JSON Schema, a value that breaks its schema and one
/// not in the wire format dead-lettered with their reasons.
#[tokio::test(flavor = "multi_thread")]
async fn confluents_json_schema_serializer_feeds_a_jdbc_sink() {
    let Some(url) = crate::postgres::postgres_url() else {
        return;
    };
    let table = format!("json_orders_{}", std::process::id());
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("json-orders", 1).await.unwrap();
    env.broker.create_topic("json-orders-dlq", 1).await.unwrap();
    confluent_json(&["produce", &bootstrap, &registry, "json-orders", "4"]).await;
    let refused = confluent_json(&["invalid", &bootstrap, &registry, "json-orders"]).await;
    assert!(refused.contains("serializer_refused"), "{refused}");
    fixtures::produce(
        &bootstrap,
        "json-orders",
        &[(Some("poison"), b"{\"id\": 5}")],
    )
    .await;
    env.create(json!({"name": "json-sink", "config": {
        "connector.class": "jdbc-sink", "topics": "json-orders", "connection.url": url.clone(),
        "table.name.format": table.clone(),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.json.JsonSchemaConverter",
        "value.converter.json.fail.invalid.schema": "true",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "auto.create": "true",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "json-orders-dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
    }}))
    .await;
    let select = format!(
        r#"SELECT id::text, name, amount::text, coalesce(note, 'NULL'), tags::text FROM "{table}" ORDER BY id"#
    );
    let rows = fixtures::db_rows_once(&url, &table, &select, 4).await;
    assert_eq!(
        rows,
        vec![
            vec!["1", "order-1 é", "10.25", "NULL", r#"["t0"]"#],
            vec!["2", "order-2 é", "20.5", "note 2", r#"["t0", "t1"]"#],
            vec!["3", "order-3 é", "30.75", "NULL", "[]"],
            vec!["4", "order-4 é", "41", "note 4", r#"["t0"]"#],
        ]
    );
    let types = fixtures::db_rows(
        &url,
        &format!(
            "SELECT column_name::text, data_type::text, is_nullable::text FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position"
        ),
    )
    .await;
    // JSON Schema's integer is Connect's int64, number float64; the
    // optional property is nullable, the array JSONB.
    assert_eq!(
        types,
        vec![
            vec!["id", "bigint", "NO"],
            vec!["name", "text", "NO"],
            vec!["amount", "double precision", "NO"],
            vec!["note", "text", "YES"],
            vec!["tags", "jsonb", "NO"],
        ]
    );
    let classes = dead_letter_reasons(&bootstrap, "json-orders-dlq", 2).await;
    assert_eq!(classes.len(), 2, "{classes:?}");
    assert_eq!(
        classes[0].0,
        "io.confluent.connect.json.JsonSchemaConverter"
    );
    assert_eq!(classes[0].1, "JsonSchemaValidation", "{classes:?}");
    assert!(classes[0].2.contains("/id"), "names the place: {classes:?}");
    assert_eq!(classes[1].1, "UnknownMagicByte", "{classes:?}");
    let (latest, _) = latest_schema(&registry, "json-orders-value").await;
    assert_eq!(latest["schemaType"], "JSON", "{latest}");
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
}

/// A source writes through `JsonSchemaConverter`; Confluent's
/// `JSONDeserializer` reads every value, validating it against the JSON
/// Schema the converter registered (Confluent's mapping: `connect.type`,
/// `connect.index`, `title`).
#[tokio::test(flavor = "multi_thread")]
async fn confluents_json_schema_deserializer_reads_what_a_source_wrote() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("json-datagen", 1).await.unwrap();
    env.create(json!({"name": "json-source", "config": {
        "connector.class": "datagen", "topic": "json-datagen", "count": "25", "rate": "0",
        "value.converter": "io.confluent.connect.json.JsonSchemaConverter",
        "value.converter.json.fail.invalid.schema": "true",
    }}))
    .await;
    let out = confluent_json(&["consume", &bootstrap, &registry, "json-datagen", "25"]).await;
    let values: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), 25);
    for v in &values {
        assert!(v["value"]["order_id"].is_i64(), "{v}");
        assert!(v["value"]["amount"].is_number(), "{v}");
        assert!(v["value"]["status"].is_string(), "{v}");
    }
    let (latest, schema) = latest_schema(&registry, "json-datagen-value").await;
    assert_eq!(latest["schemaType"], "JSON", "{latest}");
    assert_eq!(schema["type"], "object", "{schema}");
    assert_eq!(
        schema["properties"]["order_id"],
        json!({"type": "integer", "connect.type": "int64", "connect.index": 0}),
        "{schema}"
    );
}

/// Confluent's `SchemaRegistryClient` with JSON schemas on the built-in
/// registry: ids, JSON Schema compatibility by Confluent's rules, the type
/// kept, and what is refused.
#[tokio::test(flavor = "multi_thread")]
async fn confluents_registry_client_registers_json_schemas() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let out = confluent_json(&["registry", &registry, "json-value"]).await;
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["v1_id"], 1, "{r}");
    assert_eq!(r["v1_again_id"], 1, "the same schema, spaced: {r}");
    assert_eq!(
        r["optional_added_compatible"], true,
        "an optional property added to a closed model: {r}"
    );
    assert_eq!(r["v2_id"], 2, "{r}");
    assert_eq!(r["type_changed_compatible"], false, "{r}");
    assert_eq!(
        r["type_changed"],
        json!({"status": 409, "code": 409}),
        "{r}"
    );
    assert_eq!(r["by_id_type"], "JSON", "{r}");
    assert_eq!(
        r["latest"],
        json!({"version": 2, "id": 2, "type": "JSON"}),
        "{r}"
    );
    assert_eq!(
        r["avro_in_json_subject"],
        json!({"status": 409, "code": 409}),
        "{r}"
    );
    assert_eq!(
        r["invalid_schema"],
        json!({"status": 422, "code": 42201}),
        "{r}"
    );
}

/// A WASM transform between JSON Schema in and JSON Schema out: its output
/// is written with the schema followed from the input's and registered as
/// JSON under the output topic's subject; Confluent's validating
/// deserializer reads it.
#[tokio::test(flavor = "multi_thread")]
async fn a_transform_between_json_schema_topics_writes_a_followed_schema() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("json-in", 1).await.unwrap();
    env.broker.create_topic("json-in.out", 1).await.unwrap();
    confluent_json(&["produce", &bootstrap, &registry, "json-in", "3"]).await;
    env.create(json!({"name": "json-stream", "config": {
        "connector.class": "stream", "topics": "json-in", "output.topic": "${topic}.out",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.json.JsonSchemaConverter",
        "value.converter.json.fail.invalid.schema": "true",
        "transforms": "ref", "transforms.ref.type": "wasm",
        "transforms.ref.module": fixtures::example_component().display().to_string(),
        "transforms.ref.uppercase.field": "name",
    }}))
    .await;
    let out = match try_python(
        "confluent_json_schema.py",
        &["consume", &bootstrap, &registry, "json-in.out", "3"],
    )
    .await
    {
        Ok(out) => out,
        Err(e) => panic!(
            "{e}\nthe stream: {}",
            status(&registry, "json-stream").await
        ),
    };
    let values: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), 3);
    for (i, v) in values.iter().enumerate() {
        let n = i + 1;
        assert_eq!(v["value"]["id"], n, "{v}");
        assert_eq!(v["value"]["name"], format!("ORDER-{n} É"), "{v}");
        assert_eq!(v["value"]["processed_by"], "sluice", "{v}");
    }
    let (latest, schema) = latest_schema(&registry, "json-in.out-value").await;
    assert_eq!(latest["schemaType"], "JSON", "{latest}");
    let p = &schema["properties"];
    // Unchanged fields keep their types; the added one is an optional string.
    assert_eq!(p["id"]["connect.type"], "int64", "{schema}");
    assert_eq!(p["amount"]["connect.type"], "float64", "{schema}");
    assert_eq!(p["tags"]["type"], "array", "{schema}");
    assert_eq!(
        p["processed_by"]["oneOf"],
        json!([{"type": "null"}, {"type": "string"}]),
        "{schema}"
    );
    assert_eq!(schema["title"], "shop.Order", "{schema}");
}

/// Certificates for a registry that authenticates clients: a CA, the
/// server's certificate for `localhost`, and a client's chain with its key
/// in one PEM file, as `schema.registry.ssl.keystore.location` takes it.
struct MutualTls {
    ca: std::path::PathBuf,
    server: sluice_runtime::config::RestTls,
    client_keystore: std::path::PathBuf,
    client_cert: std::path::PathBuf,
    client_key: std::path::PathBuf,
}

fn mutual_tls(dir: &Path) -> MutualTls {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sluice test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let leaf = |name: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    let (client_cert, client_key) = leaf("sluice-client", ExtendedKeyUsagePurpose::ClientAuth);
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca_file = write("ca.pem", ca.pem());
    MutualTls {
        server: sluice_runtime::config::RestTls {
            certificate: write("server.pem", server_cert),
            key: write("server.key", server_key),
            client_auth: sluice_runtime::config::ClientAuth::Required,
            truststore: Some(ca_file.clone()),
        },
        client_keystore: write("client.pem", format!("{client_cert}{client_key}")),
        client_cert: write("client.crt", client_cert),
        client_key: write("client.key", client_key),
        ca: ca_file,
    }
}

/// A PEM file as a trust or key store.
fn pem_store(path: &Path) -> sluice_runtime::schema::registry::stores::Store {
    sluice_runtime::schema::registry::stores::Store {
        location: path.display().to_string(),
        store_type: sluice_runtime::schema::registry::stores::StoreType::Pem,
        password: None,
        key_password: None,
    }
}

/// Runs a tool the Java key store checks need (`keytool` from the JDK,
/// `openssl`); they cannot run without it and say so.
fn run_tool(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("`{program}` is needed to make JKS and PKCS12 stores for this check and could not run: {e}")
        });
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Trust and key stores as Kafka Connect users have them, made by the
/// JDK's `keytool` (and `openssl` for the PKCS12 keystore, since keytool
/// imports no PEM key): the same CA and client certificate as JKS and as
/// PKCS12, the JKS key under a password of its own.
#[tokio::test(flavor = "multi_thread")]
async fn java_key_stores_reach_a_registry_that_requires_client_certificates() {
    use sluice_runtime::schema::registry::Registry;
    use sluice_runtime::schema::registry::client::{ClientConfig, HttpRegistry};
    use sluice_runtime::schema::registry::stores::{Store, StoreType};
    let dir = tempfile::tempdir().unwrap();
    let tls = mutual_tls(dir.path());
    let path = |name: &str| dir.path().join(name).display().to_string();
    let ca = tls.ca.display().to_string();
    for (file, kind) in [("trust.jks", "JKS"), ("trust.p12", "PKCS12")] {
        run_tool(
            "keytool",
            &[
                "-importcert",
                "-noprompt",
                "-alias",
                "ca",
                "-file",
                &ca,
                "-keystore",
                &path(file),
                "-storetype",
                kind,
                "-storepass",
                "trust-secret",
            ],
        );
    }
    run_tool(
        "openssl",
        &[
            "pkcs12",
            "-export",
            "-in",
            &tls.client_cert.display().to_string(),
            "-inkey",
            &tls.client_key.display().to_string(),
            "-name",
            "client",
            "-out",
            &path("client.p12"),
            "-passout",
            "pass:key-secret",
        ],
    );
    run_tool(
        "keytool",
        &[
            "-importkeystore",
            "-noprompt",
            "-srckeystore",
            &path("client.p12"),
            "-srcstoretype",
            "PKCS12",
            "-srcstorepass",
            "key-secret",
            "-destkeystore",
            &path("client.jks"),
            "-deststoretype",
            "JKS",
            "-deststorepass",
            "key-secret",
            "-destkeypass",
            "own-key-secret",
            "-alias",
            "client",
        ],
    );
    let env = InProcess::start();
    let (url, stop) = serve_mutual_tls(&env, &tls).await;
    let store = |file: &str, store_type, password: &str, key_password: Option<&str>| Store {
        location: path(file),
        store_type,
        password: Some(password.to_string()),
        key_password: key_password.map(str::to_string),
    };
    for (trust, key) in [
        (
            store("trust.jks", StoreType::Jks, "trust-secret", None),
            store(
                "client.jks",
                StoreType::Jks,
                "key-secret",
                Some("own-key-secret"),
            ),
        ),
        (
            store("trust.p12", StoreType::Pkcs12, "trust-secret", None),
            store("client.p12", StoreType::Pkcs12, "key-secret", None),
        ),
    ] {
        let client = HttpRegistry::new(ClientConfig {
            urls: vec![url.clone()],
            basic_auth: None,
            truststore: Some(trust.clone()),
            keystore: Some(key.clone()),
        })
        .unwrap_or_else(|e| panic!("{trust:?} {key:?}: {e}"));
        assert_eq!(
            client.latest("nothing-value").await.unwrap(),
            None,
            "answered over mutual TLS with {trust:?} and {key:?}"
        );
    }
    // A converter configured as in Kafka Connect, with JKS stores.
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("jks-orders", 1).await.unwrap();
    let converter_keys = |truststore_password: &str| {
        json!({
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": url.clone(),
            "value.converter.schema.registry.ssl.truststore.location": path("trust.jks"),
            "value.converter.schema.registry.ssl.truststore.type": "JKS",
            "value.converter.schema.registry.ssl.truststore.password": truststore_password,
            "value.converter.schema.registry.ssl.keystore.location": path("client.jks"),
            "value.converter.schema.registry.ssl.keystore.type": "JKS",
            "value.converter.schema.registry.ssl.keystore.password": "key-secret",
            "value.converter.schema.registry.ssl.key.password": "own-key-secret",
        })
    };
    let mut config = json!({
        "connector.class": "datagen", "topic": "jks-orders", "count": "5", "rate": "0",
    });
    for (k, v) in converter_keys("trust-secret").as_object().unwrap() {
        config[k] = v.clone();
    }
    env.create(json!({"name": "jks-source", "config": config}))
        .await;
    fixtures::topic_records(
        &bootstrap,
        "jks-orders",
        5,
        "5 records written over JKS stores",
    )
    .await;
    // A wrong password is refused before anything runs, naming the store.
    let mut refused: sluice_sdk::ConfigMap = [
        ("name", "refused"),
        ("connector.class", "datagen"),
        ("topic", "t"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in converter_keys("wrong").as_object().unwrap() {
        refused.insert(k.clone(), v.as_str().unwrap().to_string());
    }
    let e = sluice_runtime::config::CommonConfig::split(&refused).unwrap_err();
    assert_eq!(
        e.key.as_deref(),
        Some("value.converter.schema.registry.ssl.truststore.location"),
        "{e}"
    );
    assert!(e.to_string().contains("password"), "{e}");
    stop.cancel();
}

/// The registry over mutual TLS: the worker's REST listener requiring
/// client certificates (`listeners.https.ssl.client.authentication=required`)
/// serves the built-in registry; a converter with the CA as its trust store
/// and its certificate as its keystore registers and writes, a client
/// without a certificate is refused in the handshake, and a keystore that
/// is not one is refused at validation, naming the key.
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_requires_client_certificates() {
    use sluice_runtime::schema::registry::client::{ClientConfig, HttpRegistry};
    use sluice_runtime::schema::registry::{Registry, RegistryError};
    let dir = tempfile::tempdir().unwrap();
    let tls = mutual_tls(dir.path());
    let env = InProcess::start();
    let (url, stop) = serve_mutual_tls(&env, &tls).await;
    let client = |keystore: Option<&Path>| {
        HttpRegistry::new(ClientConfig {
            urls: vec![url.clone()],
            basic_auth: None,
            truststore: Some(pem_store(&tls.ca)),
            keystore: keystore.map(pem_store),
        })
        .unwrap()
    };
    // Without a certificate: refused in the handshake, and said so.
    let refused = client(None).latest("nothing-value").await.unwrap_err();
    assert!(
        matches!(refused, RegistryError::Unavailable(_)),
        "{refused}"
    );
    // With one: answered (no such subject yet).
    assert_eq!(
        client(Some(&tls.client_keystore))
            .latest("nothing-value")
            .await
            .unwrap(),
        None
    );
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("mtls-orders", 1).await.unwrap();
    env.create(json!({"name": "mtls-source", "config": {
        "connector.class": "datagen", "topic": "mtls-orders", "count": "5", "rate": "0",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": url.clone(),
        "value.converter.schema.registry.ssl.truststore.location": tls.ca.display().to_string(),
        "value.converter.schema.registry.ssl.keystore.location":
            tls.client_keystore.display().to_string(),
        "value.converter.schema.registry.ssl.keystore.type": "PEM",
    }}))
    .await;
    let written = fixtures::topic_records(&bootstrap, "mtls-orders", 5, "5 records written").await;
    use rdkafka::Message;
    assert!(
        written
            .iter()
            .all(|m| m.payload().is_some_and(|p| p.len() > 5 && p[0] == 0)),
        "every record in Confluent's wire format"
    );
    let latest = client(Some(&tls.client_keystore))
        .latest("mtls-orders-value")
        .await
        .unwrap()
        .expect("the converter registered its schema over mutual TLS");
    assert_eq!(latest.version, 1);
    // A keystore without a private key is refused before anything runs.
    let not_a_keystore = dir.path().join("cert-only.pem");
    std::fs::copy(&tls.ca, &not_a_keystore).unwrap();
    let config: sluice_sdk::ConfigMap = [
        ("name", "refused"),
        ("connector.class", "datagen"),
        ("topic", "t"),
        ("value.converter", "io.confluent.connect.avro.AvroConverter"),
        ("value.converter.schema.registry.url", url.as_str()),
        (
            "value.converter.schema.registry.ssl.keystore.location",
            not_a_keystore.to_str().unwrap(),
        ),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let refused = sluice_runtime::config::CommonConfig::split(&config).unwrap_err();
    assert_eq!(
        refused.key.as_deref(),
        Some("value.converter.schema.registry.ssl.keystore.location"),
        "{refused}"
    );
    assert!(refused.to_string().contains("private key"), "{refused}");
    stop.cancel();
}

/// Confluent's `ProtobufSerializer` (a message class as users write it:
/// nested message, enum, map, repeated, Timestamp, uint32) against the
/// built-in registry, which it gives a descriptor; the sink writes typed
/// columns; a message that does not decode and a value not in the wire
/// format are dead-lettered with their reasons.
#[tokio::test(flavor = "multi_thread")]
async fn confluents_protobuf_serializer_feeds_a_jdbc_sink() {
    let Some(url) = crate::postgres::postgres_url() else {
        return;
    };
    let table = format!("proto_orders_{}", std::process::id());
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("proto-orders", 1).await.unwrap();
    env.broker
        .create_topic("proto-orders-dlq", 1)
        .await
        .unwrap();
    confluent_protobuf(&["produce", &bootstrap, &registry, "proto-orders", "3"]).await;
    // Schema id 1, message [0], then field 1 (an int64) as a length-
    // delimited field: not an Order.
    let undecodable: &[u8] = &[0, 0, 0, 0, 1, 0, 0x0a, 0x7f];
    fixtures::produce(
        &bootstrap,
        "proto-orders",
        &[
            (Some("broken"), undecodable),
            (Some("poison"), b"{\"id\": 5}"),
        ],
    )
    .await;
    env.create(json!({"name": "proto-sink", "config": {
        "connector.class": "jdbc-sink", "topics": "proto-orders", "connection.url": url.clone(),
        "table.name.format": table.clone(),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
        "auto.create": "true",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "proto-orders-dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
    }}))
    .await;
    let select = format!(
        r#"SELECT id::text, name, amount::text, to_char(placed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'),
                  tags::text, status, coalesce(address::text, 'NULL'), counts::text, units::text
           FROM "{table}" ORDER BY id"#
    );
    let rows = fixtures::db_rows_once(&url, &table, &select, 3).await;
    assert_eq!(
        rows,
        vec![
            vec![
                "1",
                "order-1 é",
                "10.25",
                "2026-12-01 10:30:00.250",
                r#"["t0"]"#,
                "PAID",
                "NULL",
                r#"{"a": 1}"#,
                "4000000001"
            ],
            vec![
                "2",
                "order-2 é",
                "20.5",
                "2026-12-02 10:30:00.250",
                r#"["t0", "t1"]"#,
                "SHIPPED",
                r#"{"city": "city 2"}"#,
                r#"{"a": 2}"#,
                "4000000002"
            ],
            // proto3: the enum's 0 is unset on the wire and reads as NEW.
            vec![
                "3",
                "order-3 é",
                "30.75",
                "2026-12-03 10:30:00.250",
                "[]",
                "NEW",
                "NULL",
                r#"{"a": 3}"#,
                "4000000003"
            ],
        ]
    );
    let types = fixtures::db_rows(
        &url,
        &format!(
            "SELECT column_name::text, data_type::text FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position"
        ),
    )
    .await;
    // Confluent's mapping: every proto3 field optional; uint32 is int64;
    // Timestamp is Connect's Timestamp; nested message, map and repeated
    // fields JSONB.
    assert_eq!(
        types,
        vec![
            vec!["id", "bigint"],
            vec!["name", "text"],
            vec!["amount", "double precision"],
            vec!["placed_at", "timestamp with time zone"],
            vec!["tags", "jsonb"],
            vec!["status", "text"],
            vec!["address", "jsonb"],
            vec!["counts", "jsonb"],
            vec!["units", "bigint"],
        ]
    );
    let classes = dead_letter_reasons(&bootstrap, "proto-orders-dlq", 2).await;
    assert_eq!(classes.len(), 2, "{classes:?}");
    assert_eq!(
        classes[0].0,
        "io.confluent.connect.protobuf.ProtobufConverter"
    );
    assert_eq!(classes[0].1, "MalformedProtobuf", "{classes:?}");
    assert!(
        classes[0].2.contains("shop.Order"),
        "names the message: {classes:?}"
    );
    assert_eq!(classes[1].1, "UnknownMagicByte", "{classes:?}");
    let latest = latest_version(&registry, "proto-orders-value").await;
    assert_eq!(latest["schemaType"], "PROTOBUF", "{latest}");
    fixtures::db_exec(&url, &format!(r#"DROP TABLE IF EXISTS "{table}""#)).await;
}

/// A source writes through `ProtobufConverter`; Confluent's
/// `ProtobufDeserializer` reads every value with a message class built
/// from the schema the converter registered, as the registry serves it to
/// that client (`format=serialized`).
#[tokio::test(flavor = "multi_thread")]
async fn confluents_protobuf_deserializer_reads_what_a_source_wrote() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("proto-datagen", 1).await.unwrap();
    env.create(json!({"name": "proto-source", "config": {
        "connector.class": "datagen", "topic": "proto-datagen", "count": "25", "rate": "0",
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
    }}))
    .await;
    let out = confluent_protobuf(&["consume", &bootstrap, &registry, "proto-datagen", "25"]).await;
    let mut lines = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let head = lines.next().unwrap();
    assert_eq!(head["schema_type"], "PROTOBUF", "{head}");
    let values: Vec<Value> = lines.collect();
    assert_eq!(values.len(), 25);
    for v in &values {
        // protobuf's JSON form writes an int64 as a string.
        let id: i64 = v["value"]["order_id"].as_str().unwrap().parse().unwrap();
        assert!(id > 0, "{v}");
        assert!(v["value"]["amount"].is_number(), "{v}");
        assert!(v["value"]["customer_id"].is_string(), "{v}");
    }
    let latest = latest_version(&registry, "proto-datagen-value").await;
    let text = latest["schema"].as_str().unwrap();
    assert!(text.starts_with("syntax = \"proto3\";"), "{text}");
    assert!(text.contains("  int64 order_id = 1;\n"), "{text}");
}

/// Confluent's `SchemaRegistryClient` with Protobuf schemas: one id for a
/// schema as text, re-spaced, or as a descriptor; compatibility by
/// Confluent's Protobuf rules; the type kept; an invalid schema refused.
#[tokio::test(flavor = "multi_thread")]
async fn confluents_registry_client_registers_protobuf_schemas() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let out = confluent_protobuf(&["registry", &registry, "proto-value"]).await;
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["v1_id"], 1, "{r}");
    assert_eq!(
        r["v1_as_descriptor_id"], 1,
        "the same schema as a descriptor: {r}"
    );
    assert_eq!(r["v1_lookup_version"], 1, "found re-spaced: {r}");
    assert_eq!(r["field_added_compatible"], true, "{r}");
    assert_eq!(r["v2_id"], 2, "{r}");
    assert_eq!(r["kind_changed_compatible"], false, "{r}");
    assert_eq!(
        r["kind_changed"],
        json!({"status": 409, "code": 409}),
        "{r}"
    );
    assert_eq!(r["by_id_type"], "PROTOBUF", "{r}");
    assert_eq!(
        r["latest"],
        json!({"version": 2, "id": 2, "type": "PROTOBUF"}),
        "{r}"
    );
    assert_eq!(r["types"], json!(["AVRO", "JSON", "PROTOBUF"]), "{r}");
    assert_eq!(
        r["invalid_schema"],
        json!({"status": 422, "code": 42201}),
        "{r}"
    );
}

/// A WASM transform between Protobuf topics: the output is written with
/// the schema followed from the input's, registered as PROTOBUF; fields
/// keep their numbers and the added one takes a number of its own, so
/// Confluent's deserializer reads it.
#[tokio::test(flavor = "multi_thread")]
async fn a_transform_between_protobuf_topics_writes_a_followed_schema() {
    let env = InProcess::start();
    let registry = serve(&env).await;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    env.broker.create_topic("proto-in", 1).await.unwrap();
    env.broker.create_topic("proto-in.out", 1).await.unwrap();
    confluent_protobuf(&["produce", &bootstrap, &registry, "proto-in", "3"]).await;
    env.create(json!({"name": "proto-stream", "config": {
        "connector.class": "stream", "topics": "proto-in", "output.topic": "${topic}.out",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.protobuf.ProtobufConverter",
        "value.converter.enhanced.protobuf.schema.support": "true",
        "transforms": "ref", "transforms.ref.type": "wasm",
        "transforms.ref.module": fixtures::example_component().display().to_string(),
        "transforms.ref.uppercase.field": "name",
    }}))
    .await;
    let out = match try_python(
        "confluent_protobuf.py",
        &["consume", &bootstrap, &registry, "proto-in.out", "3"],
    )
    .await
    {
        Ok(out) => out,
        Err(e) => panic!(
            "{e}\nthe stream: {}",
            status(&registry, "proto-stream").await
        ),
    };
    let mut lines = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let head = lines.next().unwrap();
    assert_eq!(head["message"], "shop.Order", "the package kept: {head}");
    let values: Vec<Value> = lines.collect();
    assert_eq!(values.len(), 3);
    for (i, v) in values.iter().enumerate() {
        let n = i + 1;
        assert_eq!(v["value"]["id"], n.to_string(), "{v}");
        assert_eq!(v["value"]["name"], format!("ORDER-{n} É"), "{v}");
        assert_eq!(v["value"]["processed_by"], "sluice", "{v}");
        assert_eq!(v["value"]["units"], 4_000_000_000u64 + n as u64, "{v}");
    }
    let latest = latest_version(&registry, "proto-in.out-value").await;
    let text = latest["schema"].as_str().unwrap();
    assert!(text.contains("  int64 id = 1;\n"), "{text}");
    assert!(text.contains("  uint32 units = 9;\n"), "{text}");
    assert!(text.contains("  string processed_by = 10;\n"), "{text}");
}
