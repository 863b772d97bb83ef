//! The REST API's routes, driven with `oneshot` (no socket): Kafka Connect's
//! paths, status codes and JSON shapes, including the errors.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::fixtures::InProcess;

async fn call(
    env: &InProcess,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    let body = match body {
        Some(v) => {
            req = req.header(header::CONTENT_TYPE, "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    raw(env, req.body(body).unwrap()).await
}

async fn raw(env: &InProcess, req: Request<Body>) -> (StatusCode, Value) {
    let response = sluice_runtime::rest::router(env.herder.clone())
        .oneshot(req)
        .await
        .unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn source(name: &str) -> Value {
    json!({"name": name, "config": {"connector.class": "datagen", "topic": format!("{name}-t"), "rate": "20", "count": "50"}})
}

fn assert_error(status: StatusCode, body: &Value, code: u16, needle: &str) {
    assert_eq!(status.as_u16(), code, "{body}");
    assert_eq!(body["error_code"], code, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains(needle),
        "`{needle}` not in {body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connector_lifecycle_and_errors() {
    let env = InProcess::start();
    let (s, b) = call(&env, "GET", "/", None).await;
    assert_eq!((s, b["version"].is_string()), (StatusCode::OK, true));
    // While the worker restores its connectors, /health says so.
    env.worker.set_starting(true);
    let (s, b) = call(&env, "GET", "/health", None).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{b}");
    assert!(b["message"].as_str().unwrap().contains("starting"), "{b}");
    env.worker.set_starting(false);
    assert_eq!(call(&env, "GET", "/health", None).await.0, StatusCode::OK);
    assert_eq!(call(&env, "GET", "/connectors", None).await.1, json!([]));

    // Create: 201 with Kafka Connect's shape; again: 409.
    let (s, b) = call(&env, "POST", "/connectors", Some(source("gen"))).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["name"], "gen");
    assert_eq!(b["type"], "source");
    assert_eq!(b["tasks"], json!([{"connector": "gen", "task": 0}]));
    assert_eq!(b["config"]["topic"], "gen-t");
    let (s, b) = call(&env, "POST", "/connectors", Some(source("gen"))).await;
    assert_error(s, &b, 409, "already exists");

    // Bad input is a 4xx naming what is wrong, never a 500.
    let (s, b) = call(
        &env,
        "POST",
        "/connectors",
        Some(json!({"name": "x", "config": {"connector.class": "nope"}})),
    )
    .await;
    assert_error(s, &b, 400, "connector.class");
    let (s, b) = call(
        &env,
        "POST",
        "/connectors",
        Some(json!({"name": "x", "config": {"connector.class": "datagen"}})),
    )
    .await;
    assert_error(s, &b, 400, "key `topic`");
    let (s, b) = call(
        &env,
        "POST",
        "/connectors",
        Some(json!({"name": "x", "config": {"connector.class": "datagen", "topic": "bad topic!"}})),
    )
    .await;
    assert_error(s, &b, 400, "key `topic`: `bad topic!` has ` `");
    let (s, b) = call(&env, "POST", "/connectors", Some(json!({"name": "y", "config": {"connector.class": "datagen", "topic": "t"}, "initial_state": "SLEEPING"}))).await;
    assert_error(
        s,
        &b,
        400,
        "initial_state `SLEEPING` is not one of RUNNING, PAUSED, STOPPED",
    );
    let (s, b) = call(&env, "POST", "/connectors", Some(json!({"name": "y", "config": {"connector.class": "datagen", "topic": "t"}, "initial_state": 3}))).await;
    assert_error(s, &b, 400, "initial_state must be one of");
    assert_eq!(
        call(&env, "GET", "/connectors/y", None).await.0,
        StatusCode::NOT_FOUND
    );
    let req = Request::post("/connectors")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    let (s, b) = raw(&env, req).await;
    assert_error(s, &b, 400, "request body");
    let req = Request::post("/connectors")
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from("{}"))
        .unwrap();
    let (s, b) = raw(&env, req).await;
    assert_error(s, &b, 415, "request body");
    let huge = format!(
        "{{\"name\": \"big\", \"config\": {{\"x\": \"{}\"}}}}",
        "a".repeat(3 * 1024 * 1024)
    );
    let req = Request::post("/connectors")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(huge))
        .unwrap();
    let (s, b) = raw(&env, req).await;
    assert_error(s, &b, 413, "request body");

    // Reads.
    let (s, b) = call(&env, "GET", "/connectors/gen", None).await;
    assert_eq!((s, b["name"].as_str()), (StatusCode::OK, Some("gen")));
    let (s, b) = call(&env, "GET", "/connectors/missing", None).await;
    assert_error(s, &b, 404, "Connector missing not found");
    let (s, b) = call(&env, "GET", "/connectors/missing/status", None).await;
    assert_error(s, &b, 404, "not found");
    let (s, b) = call(&env, "GET", "/connectors/gen/tasks", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b[0]["id"], json!({"connector": "gen", "task": 0}));
    let (s, b) = call(&env, "GET", "/connectors/gen/tasks/0/status", None).await;
    assert_eq!((s, b["id"].as_u64()), (StatusCode::OK, Some(0)));
    let (s, b) = call(&env, "GET", "/connectors/gen/tasks/9/status", None).await;
    assert_error(s, &b, 404, "Task gen-9 not found");
    let (s, b) = call(&env, "GET", "/connectors?expand=status&expand=info", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b["gen"]["status"]["connector"]["state"], "RUNNING", "{b}");
    assert_eq!(b["gen"]["info"]["type"], "source", "{b}");
    let (_, plugins) = call(&env, "GET", "/connector-plugins", None).await;
    assert!(
        plugins
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["class"] == "jdbc-sink" && p["type"] == "sink")
    );
    let (s, b) = call(&env, "GET", "/no/such/path", None).await;
    assert_error(s, &b, 404, "no such endpoint");

    // Secrets are hidden.
    let dir = tempfile::tempdir().unwrap();
    let sink = json!({"name": "db", "config": {
        "connector.class": "jdbc-sink", "topics": "gen-t",
        "connection.url": format!("jdbc:sqlite:{}", dir.path().join("x.db").display()), "connection.password": "s3cret",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id", "auto.create": "true"
    }});
    assert_eq!(
        call(&env, "POST", "/connectors", Some(sink)).await.0,
        StatusCode::CREATED
    );
    let (_, config) = call(&env, "GET", "/connectors/db/config", None).await;
    assert_eq!(config["connection.password"], "[hidden]");

    // PATCH merges; null removes.
    let (s, b) = call(
        &env,
        "PATCH",
        "/connectors/gen/config",
        Some(json!({"rate": "30", "count": null})),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (_, config) = call(&env, "GET", "/connectors/gen/config", None).await;
    assert_eq!(config["rate"], "30");
    assert!(config.get("count").is_none(), "{config}");
    let (s, b) = call(
        &env,
        "PATCH",
        "/connectors/gen/config",
        Some(json!({"rate": "fast"})),
    )
    .await;
    assert_error(s, &b, 400, "key `rate`");
    let (s, b) = call(
        &env,
        "PATCH",
        "/connectors/missing/config",
        Some(json!({"rate": "1"})),
    )
    .await;
    assert_error(s, &b, 404, "not found");

    // Restarts.
    assert_eq!(
        call(&env, "POST", "/connectors/gen/restart", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, b) = call(
        &env,
        "POST",
        "/connectors/gen/restart?includeTasks=true",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert_eq!(b["name"], "gen");
    assert_eq!(
        call(&env, "POST", "/connectors/gen/tasks/0/restart", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let (s, b) = call(&env, "POST", "/connectors/gen/tasks/7/restart", None).await;
    assert_error(s, &b, 404, "Task gen-7 not found");
    let (s, b) = call(&env, "POST", "/connectors/missing/restart", None).await;
    assert_error(s, &b, 404, "not found");

    // Delete.
    assert_eq!(
        call(&env, "DELETE", "/connectors/gen", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, b) = call(&env, "DELETE", "/connectors/gen", None).await;
    assert_error(s, &b, 404, "not found");
    assert_eq!(
        call(&env, "GET", "/connectors", None).await.1,
        json!(["db"])
    );
    env.worker.shutdown().await;
}

/// Over a real socket, with a separate HTTP client, while records flow:
/// create, pause, resume, restart, stop, resume from STOPPED, delete.
#[tokio::test(flavor = "multi_thread")]
async fn a_connector_driven_through_its_states_while_records_flow() {
    use std::time::Duration;
    let env = InProcess::start();
    env.broker.create_topic("life", 1).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let http = reqwest::Client::new();

    // An outside producer writes 1..=400, steadily.
    const COUNT: u64 = 400;
    let bootstrap = env.broker.bootstrap_servers().to_string();
    let producer = tokio::spawn(async move {
        for chunk in (1..=COUNT).collect::<Vec<_>>().chunks(20) {
            let values: Vec<Vec<u8>> = chunk
                .iter()
                .map(|i| format!(r#"{{"n":{i}}}"#).into_bytes())
                .collect();
            let refs: Vec<(Option<&str>, &[u8])> =
                values.iter().map(|v| (None, v.as_slice())).collect();
            crate::fixtures::produce(&bootstrap, "life", &refs).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("life.jsonl");
    let lines = || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let created = http
        .post(format!("{base}/connectors"))
        .json(&json!({"name": "life", "config": {"connector.class": "FileStreamSink", "topics": "life", "file": out.display().to_string()}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let state = |http: reqwest::Client, base: String| async move {
        let s: Value = http
            .get(format!("{base}/connectors/life/status"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        s
    };
    crate::fixtures::eventually(Duration::from_secs(120), "records flowing", || async {
        (lines() > 20).then_some(())
    })
    .await;

    assert_eq!(
        http.put(format!("{base}/connectors/life/pause"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    crate::fixtures::eventually(Duration::from_secs(60), "PAUSED", || {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let s = state(http, base).await;
            (s["connector"]["state"] == "PAUSED" && s["tasks"][0]["state"] == "PAUSED")
                .then_some(())
        }
    })
    .await;
    let paused_at = lines();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(lines(), paused_at, "nothing is written while paused");

    assert_eq!(
        http.put(format!("{base}/connectors/life/resume"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    crate::fixtures::eventually(Duration::from_secs(60), "flowing again", || async {
        (lines() > paused_at).then_some(())
    })
    .await;
    assert_eq!(
        http.post(format!("{base}/connectors/life/restart"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );

    assert_eq!(
        http.put(format!("{base}/connectors/life/stop"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let s = state(http.clone(), base.clone()).await;
    assert_eq!(
        (
            s["connector"]["state"].as_str(),
            s["tasks"].as_array().map(Vec::len)
        ),
        (Some("STOPPED"), Some(0)),
        "{s}"
    );
    let r = http
        .put(format!("{base}/connectors/life/pause"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409, "a STOPPED connector cannot be paused");
    assert_eq!(
        http.put(format!("{base}/connectors/life/resume"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );

    producer.await.unwrap();
    crate::fixtures::eventually(Duration::from_secs(120), "every record", || async {
        (lines() as u64 >= COUNT).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = std::fs::read_to_string(&out).unwrap();
    let mut seen: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["n"]
                .as_u64()
                .unwrap()
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        (1..=COUNT).collect::<Vec<_>>(),
        "every record exactly once through pause, restart and stop"
    );

    assert_eq!(
        http.delete(format!("{base}/connectors/life"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        http.get(format!("{base}/connectors/life"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    env.worker.shutdown().await;
}

/// KIP-875 offsets and the active topics: read any time, changed only while
/// STOPPED; a sink rewound re-delivers, a source reset starts over.
#[tokio::test(flavor = "multi_thread")]
async fn offsets_are_read_and_changed_while_stopped() {
    use std::time::Duration;
    let env = InProcess::start();
    env.broker.create_topic("rewind", 1).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let http = reqwest::Client::new();
    let values: Vec<Vec<u8>> = (0..10)
        .map(|i| format!(r#"{{"n":{i}}}"#).into_bytes())
        .collect();
    let refs: Vec<(Option<&str>, &[u8])> = values.iter().map(|v| (None, v.as_slice())).collect();
    crate::fixtures::produce(env.broker.bootstrap_servers(), "rewind", &refs).await;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rewind.jsonl");
    let lines = || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let sink = json!({"name": "rw", "config": {"connector.class": "file-sink", "topics": "rewind", "file": out.display().to_string()}});
    assert_eq!(
        http.post(format!("{base}/connectors"))
            .json(&sink)
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    crate::fixtures::eventually(Duration::from_secs(120), "ten lines", || async {
        (lines() == 10).then_some(())
    })
    .await;

    let topics: Value = http
        .get(format!("{base}/connectors/rw/topics"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(topics, json!({"rw": {"topics": ["rewind"]}}));
    let offsets: Value =
        crate::fixtures::eventually(Duration::from_secs(60), "the committed offset", || {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let o: Value = http
                    .get(format!("{base}/connectors/rw/offsets"))
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                (o["offsets"][0]["offset"]["kafka_offset"] == 10).then_some(o)
            }
        })
        .await;
    assert_eq!(
        offsets["offsets"][0]["partition"],
        json!({"kafka_topic": "rewind", "kafka_partition": 0})
    );

    // Changing offsets of a running connector is refused.
    let patch = json!({"offsets": [{"partition": {"kafka_topic": "rewind", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]});
    let r = http
        .patch(format!("{base}/connectors/rw/offsets"))
        .json(&patch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["message"].as_str().unwrap().contains("STOPPED"),
        "{body}"
    );

    // Stopped: rewind to 5, resume, records 5..9 come again.
    assert_eq!(
        http.put(format!("{base}/connectors/rw/stop"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let r = http
        .patch(format!("{base}/connectors/rw/offsets"))
        .json(&patch)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let bad = json!({"offsets": [{"partition": {"kafka_topic": "other", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}]});
    assert_eq!(
        http.patch(format!("{base}/connectors/rw/offsets"))
            .json(&bad)
            .send()
            .await
            .unwrap()
            .status(),
        400
    );
    // A partition number that is not one (negative, or past i32: 2^32 was
    // taken as partition 0 and rewound it) is refused, changing nothing.
    for partition in [json!(4_294_967_296u64), json!(-1)] {
        let wrapped = json!({"offsets": [{"partition": {"kafka_topic": "rewind", "kafka_partition": partition}, "offset": {"kafka_offset": 0}}]});
        let r = http
            .patch(format!("{base}/connectors/rw/offsets"))
            .json(&wrapped)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{partition}: {}", r.text().await.unwrap());
    }
    assert_eq!(
        http.put(format!("{base}/connectors/rw/resume"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    crate::fixtures::eventually(
        Duration::from_secs(120),
        "the rewound records again",
        || async { (lines() == 15).then_some(()) },
    )
    .await;
    let text = std::fs::read_to_string(&out).unwrap();
    let again: Vec<&str> = text.lines().skip(10).collect();
    assert_eq!(
        again,
        vec![
            r#"{"n":5}"#,
            r#"{"n":6}"#,
            r#"{"n":7}"#,
            r#"{"n":8}"#,
            r#"{"n":9}"#
        ]
    );
    // A config update restarts the tasks; the topics used stay listed until
    // a reset, as in Kafka Connect (they were forgotten).
    let mut updated = sink["config"].clone();
    updated["batch.max.records"] = json!("50");
    let r = http
        .put(format!("{base}/connectors/rw/config"))
        .json(&updated)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let topics: Value = http
        .get(format!("{base}/connectors/rw/topics"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(topics, json!({"rw": {"topics": ["rewind"]}}));
    assert_eq!(
        http.put(format!("{base}/connectors/rw/topics/reset"))
            .send()
            .await
            .unwrap()
            .status(),
        202
    );
    let topics: Value = http
        .get(format!("{base}/connectors/rw/topics"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(topics, json!({"rw": {"topics": []}}));

    // A source's offsets: read, then reset while stopped.
    let source = json!({"name": "g", "config": {"connector.class": "datagen", "topic": "g-t", "rate": "0", "count": "25"}});
    assert_eq!(
        http.post(format!("{base}/connectors"))
            .json(&source)
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    crate::fixtures::eventually(Duration::from_secs(60), "the source's offset", || {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let o: Value = http
                .get(format!("{base}/connectors/g/offsets"))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (o["offsets"][0] == json!({"partition": {"datagen.task": 0}, "offset": {"next": 25}}))
                .then_some(())
        }
    })
    .await;
    assert_eq!(
        http.put(format!("{base}/connectors/g/stop"))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    let r = http
        .delete(format!("{base}/connectors/g/offsets"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let o: Value = http
        .get(format!("{base}/connectors/g/offsets"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(o, json!({"offsets": []}));
    env.worker.shutdown().await;
}

/// Plugin listings, config definitions and Kafka Connect's validate shape,
/// including a WASM module that does not load.
#[tokio::test(flavor = "multi_thread")]
async fn plugins_describe_and_validate_their_configs() {
    let env = InProcess::start();
    let (s, all) = call(&env, "GET", "/connector-plugins?connectorsOnly=false", None).await;
    assert_eq!(s, StatusCode::OK);
    let has = |class: &str, ty: &str| {
        all.as_array()
            .unwrap()
            .iter()
            .any(|p| p["class"] == class && p["type"] == ty)
    };
    assert!(
        has("jdbc-sink", "sink") && has("wasm", "transformation"),
        "{all}"
    );
    assert!(
        has(
            "org.apache.kafka.connect.transforms.InsertField$Value",
            "transformation"
        ),
        "{all}"
    );
    // Each standard transform under the class Kafka Connect users name:
    // `$Key`/`$Value` only where Kafka Connect has them, Debezium's under
    // its own package.
    for class in [
        "org.apache.kafka.connect.transforms.Flatten$Value",
        "org.apache.kafka.connect.transforms.TimestampRouter",
        "org.apache.kafka.connect.transforms.DropHeaders",
        "io.debezium.transforms.ExtractNewRecordState",
    ] {
        assert!(has(class, "transformation"), "{class} not listed: {all}");
    }
    for class in [
        "org.apache.kafka.connect.transforms.TimestampRouter$Key",
        "org.apache.kafka.connect.transforms.DropHeaders$Value",
        "org.apache.kafka.connect.transforms.ExtractNewRecordState$Value",
    ] {
        assert!(!has(class, "transformation"), "{class} listed: {all}");
    }
    assert!(
        has(
            "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicate"
        ),
        "{all}"
    );
    let (_, only) = call(&env, "GET", "/connector-plugins", None).await;
    assert!(
        only.as_array()
            .unwrap()
            .iter()
            .all(|p| ["source", "sink", "stream"].contains(&p["type"].as_str().unwrap())),
        "{only}"
    );

    let (s, defs) = call(
        &env,
        "GET",
        "/connector-plugins/io.confluent.connect.jdbc.JdbcSinkConnector/config",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let url = defs
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "connection.url")
        .expect("connection.url defined");
    assert_eq!(
        (
            url["required"].as_bool(),
            url["importance"].as_str(),
            url["group"].as_str()
        ),
        (Some(true), Some("HIGH"), Some("Connector"))
    );
    assert!(
        defs.as_array()
            .unwrap()
            .iter()
            .any(|d| d["name"] == "topics" && d["required"] == true)
    );
    let (s, b) = call(&env, "GET", "/connector-plugins/nope/config", None).await;
    assert_error(s, &b, 404, "nope");

    // One entry per key; the problem attached to its key.
    let (s, v) = call(
        &env,
        "PUT",
        "/connector-plugins/jdbc-sink/config/validate",
        Some(json!({"name": "v", "topics": "t", "connection.url": "jdbc:sqlite:/tmp/x.db", "insert.mode": "upsert", "connection.password": "p"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["name"], "jdbc-sink");
    assert_eq!(v["error_count"], 1, "{v}");
    let entry = |v: &Value, key: &str| {
        v["configs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["value"]["name"] == key)
            .cloned()
            .unwrap()
    };
    let pk = entry(&v, "pk.mode");
    assert!(
        pk["value"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("need a primary key"),
        "{pk}"
    );
    assert_eq!(entry(&v, "insert.mode")["value"]["value"], "upsert");
    assert_eq!(entry(&v, "insert.mode")["value"]["errors"], json!([]));
    assert_eq!(
        entry(&v, "connection.password")["value"]["value"],
        "[hidden]"
    );

    // A WASM module that does not load is reported on its key.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("fake.wasm");
    std::fs::write(&fake, "not wasm").unwrap();
    let (_, v) = call(
        &env,
        "PUT",
        "/connector-plugins/datagen/config/validate",
        Some(json!({"name": "v", "topic": "t", "transforms": "x", "transforms.x.type": "wasm", "transforms.x.module": fake.display().to_string()})),
    )
    .await;
    assert_eq!(v["error_count"], 1, "{v}");
    assert!(
        entry(&v, "transforms.x.module")["value"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("loading WASM component"),
        "{v}"
    );

    let (_, v) = call(
        &env,
        "PUT",
        "/connector-plugins/datagen/config/validate",
        Some(json!({"name": "v", "topic": "t", "rate": "5"})),
    )
    .await;
    assert_eq!(v["error_count"], 0, "{v}");

    // Every key at fault, each with its error: a common key that does not
    // parse, a bad enum value of the runtime's and of the plugin's, a sink
    // without topics (on `topics` and `topics.regex`, as Kafka Connect
    // says it), a required key missing; `error_count` counts them.
    let (s, v) = call(
        &env,
        "PUT",
        "/connector-plugins/jdbc-sink/config/validate",
        Some(json!({"name": "v", "tasks.max": "x", "errors.tolerance": "some", "insert.mode": "merge"})),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["error_count"], 6, "{v}");
    for (key, says) in [
        ("tasks.max", "expected a non-negative integer"),
        ("errors.tolerance", "some"),
        ("topics", "is required"),
        ("topics.regex", "is required"),
        ("insert.mode", "merge"),
        ("connection.url", "is required but missing"),
    ] {
        let errors = entry(&v, key)["value"]["errors"].clone();
        assert_eq!(errors.as_array().map(Vec::len), Some(1), "{key}: {v}");
        assert!(errors[0].as_str().unwrap().contains(says), "{key}: {v}");
    }
    // A create refuses the config with the first of them.
    let (s, b) = call(
        &env,
        "POST",
        "/connectors",
        Some(json!({"name": "v", "config": {"connector.class": "jdbc-sink", "tasks.max": "x", "errors.tolerance": "some", "insert.mode": "merge"}})),
    )
    .await;
    assert_error(s, &b, 400, "tasks.max");
    env.worker.shutdown().await;
}

/// Whatever arrives in a request body, every endpoint that parses one
/// answers, without panicking, with a success or a 4xx: never a 5xx.
#[tokio::test(flavor = "multi_thread")]
async fn any_request_body_gets_a_success_or_a_4xx() {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let env = InProcess::start();
    let keys = prop_oneof![
        Just("name".to_string()),
        Just("config".to_string()),
        Just("connector.class".to_string()),
        Just("topics".to_string()),
        Just("topic".to_string()),
        Just("tasks.max".to_string()),
        Just("transforms".to_string()),
        Just("transforms.t.type".to_string()),
        Just("transforms.t.module".to_string()),
        Just("predicates".to_string()),
        Just("errors.tolerance".to_string()),
        Just("errors.deadletterqueue.topic.name".to_string()),
        Just("connection.url".to_string()),
        Just("offsets".to_string()),
        Just("level".to_string()),
        Just("rate".to_string()),
        "[a-z.]{0,12}",
    ];
    let scalars = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop_oneof![
            Just("datagen".to_string()),
            Just("jdbc-sink".to_string()),
            Just("file-sink".to_string()),
            Just("wasm".to_string()),
            Just("all".to_string()),
            Just("jdbc:sqlite:/nonexistent/dir/x.db".to_string()),
            ".{0,16}",
        ]
        .prop_map(Value::from),
    ];
    let json = scalars.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(keys.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    let endpoints = [
        ("POST", "/connectors"),
        ("PUT", "/connectors/fz/config"),
        ("PATCH", "/connectors/fz/config"),
        ("PUT", "/connector-plugins/jdbc-sink/config/validate"),
        ("PUT", "/connector-plugins/datagen/config/validate"),
        ("PATCH", "/connectors/fz/offsets"),
        ("POST", "/connectors/fz/dlq/replay"),
        ("PUT", "/admin/loggers/sluice_runtime"),
    ];
    let mut runner = TestRunner::deterministic();
    for case in 0..400 {
        let value = json.new_tree(&mut runner).unwrap().current();
        let (method, uri) = endpoints[case % endpoints.len()];
        let (status, body) = call(&env, method, uri, Some(value.clone())).await;
        assert!(
            status.as_u16() < 500,
            "{method} {uri} with {value} answered {status}: {body}"
        );
        if status.is_client_error() {
            assert_eq!(body["error_code"], status.as_u16(), "{body}");
        }
        // Arbitrary bytes too.
        let bytes: Vec<u8> = prop::collection::vec(any::<u8>(), 0..64)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(bytes))
            .unwrap();
        let (status, _) = raw(&env, req).await;
        assert!(
            status.as_u16() < 500,
            "{method} {uri} with random bytes answered {status}"
        );
    }
    env.worker.shutdown().await;
}

/// Serves the REST API of an in-process worker on a real socket.
async fn serve(env: &InProcess) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = sluice_runtime::rest::router(env.herder.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// Runs the `sluice` binary: (exit code, stdout, stderr).
async fn sluice(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("SLUICE_URL")
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `sluice connectors ...` and `sluice plugins` against a worker over a real
/// socket: tables, `--output json`, and the exit codes scripts rely on (0 ok,
/// 1 the worker's error with its message, 2 bad input file, 3 unreachable).
#[tokio::test(flavor = "multi_thread")]
async fn the_connectors_cli_drives_a_worker() {
    use std::time::Duration;
    let env = InProcess::start();
    let base = serve(&env).await;
    let cli = |args: Vec<&str>| {
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        let url = base.clone();
        async move {
            let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
            all.extend(["--url", url.as_str()]);
            sluice(&all, &[]).await
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gen.json");
    std::fs::write(&file, source("gen").to_string()).unwrap();
    let file = file.display().to_string();

    let (code, out, err) = cli(vec!["plugins"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("CLASS") && out.contains("datagen") && out.contains("jdbc-sink"),
        "{out}"
    );
    let (code, out, _) = cli(vec!["plugins", "--all", "--output", "json"]).await;
    assert_eq!(code, 0);
    let all: Value = serde_json::from_str(&out).unwrap();
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|p| p["type"] == "predicate"),
        "{all}"
    );
    assert_eq!(
        cli(vec!["connectors", "list"]).await.1.trim(),
        "no connectors"
    );

    // Create; again is the worker's 409, its message printed, exit 1.
    let (code, out, err) = cli(vec!["connectors", "create", "-f", &file]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("created gen (source, 1 task)"), "{out}");
    assert!(out.contains("topic") && out.contains("gen-t"), "{out}");
    let (code, out, err) = cli(vec!["connectors", "create", "-f", &file]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("Connector gen already exists") && err.contains("HTTP 409"),
        "{err}"
    );
    let (code, out, _) = cli(vec![
        "connectors",
        "create",
        "-f",
        &file,
        "--output",
        "json",
    ])
    .await;
    assert_eq!(code, 1);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["error_code"],
        409,
        "{out}"
    );

    // Reads: tables and JSON.
    crate::fixtures::eventually(
        Duration::from_secs(60),
        "gen listed RUNNING",
        || async move {
            let (_, out, _) = cli(vec!["connectors", "list"]).await;
            let row = out.lines().find(|l| l.starts_with("gen "))?.to_string();
            (out.starts_with("NAME")
                && row.contains("source")
                && row.contains("1 RUNNING")
                && row.contains("datagen"))
            .then_some(())
        },
    )
    .await;
    let (code, out, _) = cli(vec!["connectors", "list", "--output", "json"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["gen"]["info"]["type"], "source", "{listed}");
    let (code, out, _) = cli(vec!["connectors", "get", "gen"]).await;
    assert_eq!(code, 0);
    assert!(
        out.contains("KEY") && out.contains("connector.class") && out.contains("datagen"),
        "{out}"
    );
    let (code, out, _) = cli(vec!["connectors", "status", "gen"]).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("gen (source): RUNNING"), "{out}");
    assert!(out.contains("TASK") && out.contains("test-worker"), "{out}");
    let (code, out, _) = cli(vec!["connectors", "status", "gen", "--output", "json"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["connector"]["state"],
        "RUNNING"
    );
    let (code, _, err) = cli(vec!["connectors", "get", "missing"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("Connector missing not found") && err.contains("HTTP 404"),
        "{err}"
    );
    let (code, _, err) = cli(vec!["connectors", "status", "missing"]).await;
    assert_eq!((code, err.contains("HTTP 404")), (1, true), "{err}");

    // Update from the same kind of file.
    let mut changed = source("gen");
    changed["config"]["rate"] = json!("30");
    std::fs::write(&file, changed.to_string()).unwrap();
    let (code, out, err) = cli(vec!["connectors", "update", "-f", &file]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("updated (tasks restarted): gen"), "{out}");
    let (code, out, _) = cli(vec!["connectors", "update", "-f", &file]).await;
    assert_eq!((code, out.starts_with("unchanged")), (0, true), "{out}");
    let mut invalid = changed.clone();
    invalid["config"]["rate"] = json!("fast");
    let bad_file = dir.path().join("bad.json");
    std::fs::write(&bad_file, invalid.to_string()).unwrap();
    let (code, _, err) = cli(vec![
        "connectors",
        "update",
        "-f",
        &bad_file.display().to_string(),
    ])
    .await;
    assert_eq!(code, 1);
    assert!(
        err.contains("key `rate`") && err.contains("HTTP 400"),
        "{err}"
    );

    // Target states.
    let (code, out, _) = cli(vec!["connectors", "pause", "gen"]).await;
    assert_eq!((code, out.trim()), (0, "paused connector gen"));
    let (_, out, _) = cli(vec!["connectors", "status", "gen"]).await;
    assert!(out.starts_with("gen (source): PAUSED"), "{out}");
    let (code, out, _) = cli(vec!["connectors", "resume", "gen", "--output", "json"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!({"name": "gen", "result": "resumed"})
    );
    let (code, out, _) = cli(vec!["connectors", "stop", "gen"]).await;
    assert_eq!((code, out.trim()), (0, "stopped connector gen"));
    let (_, out, _) = cli(vec!["connectors", "status", "gen"]).await;
    assert!(
        out.starts_with("gen (source): STOPPED") && out.contains("no tasks"),
        "{out}"
    );
    let (code, _, err) = cli(vec!["connectors", "pause", "gen"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("STOPPED") && err.contains("HTTP 409"), "{err}");
    let (code, _, err) = cli(vec!["connectors", "restart", "gen"]).await;
    assert_eq!((code, err.contains("HTTP 409")), (1, true), "{err}");
    let (code, out, _) = cli(vec!["connectors", "offsets", "gen", "--output", "json"]).await;
    assert_eq!(code, 0);
    assert!(
        serde_json::from_str::<Value>(&out).unwrap()["offsets"].is_array(),
        "{out}"
    );
    let (code, out, _) = cli(vec!["connectors", "offsets", "gen"]).await;
    assert!(
        code == 0 && (out.starts_with("PARTITION") || out.trim() == "no offsets"),
        "{out}"
    );
    assert_eq!(cli(vec!["connectors", "resume", "gen"]).await.0, 0);
    let (code, out, _) = cli(vec!["connectors", "restart", "gen"]).await;
    assert_eq!((code, out.trim()), (0, "restarted connector gen"));
    let (code, out, err) = cli(vec!["connectors", "restart", "gen", "--include-tasks"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("gen (source): ") && out.contains("TASK"),
        "{out}"
    );
    let (code, _, err) = cli(vec![
        "connectors",
        "restart",
        "missing",
        "--include-tasks",
        "--only-failed",
    ])
    .await;
    assert_eq!((code, err.contains("HTTP 404")), (1, true), "{err}");

    // Bad input files: exit 2, nothing sent.
    let not_json = dir.path().join("not.json");
    std::fs::write(&not_json, "{nope").unwrap();
    let (code, _, err) = cli(vec![
        "connectors",
        "create",
        "-f",
        &not_json.display().to_string(),
    ])
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("not valid JSON"), "{err}");
    let nameless = dir.path().join("nameless.json");
    std::fs::write(&nameless, r#"{"config": {"connector.class": "datagen"}}"#).unwrap();
    let (code, _, err) = cli(vec![
        "connectors",
        "update",
        "-f",
        &nameless.display().to_string(),
    ])
    .await;
    assert_eq!(code, 2);
    assert!(err.contains("no `name` string"), "{err}");
    let (code, _, err) = cli(vec!["connectors", "create", "-f", "/nonexistent/c.json"]).await;
    assert_eq!(
        (code, err.contains("reading /nonexistent/c.json")),
        (2, true),
        "{err}"
    );
    assert_eq!(
        cli(vec!["connectors", "frobnicate"]).await.0,
        2,
        "usage errors exit 2"
    );

    // Delete; again is a 404.
    let (code, out, _) = cli(vec!["connectors", "delete", "gen"]).await;
    assert_eq!((code, out.trim()), (0, "deleted connector gen"));
    let (code, _, err) = cli(vec!["connectors", "delete", "gen"]).await;
    assert_eq!((code, err.contains("HTTP 404")), (1, true), "{err}");

    // The URL from the environment; a worker that is not there: exit 3.
    let (code, out, _) = sluice(&["connectors", "list"], &[("SLUICE_URL", base.as_str())]).await;
    assert_eq!((code, out.trim()), (0, "no connectors"));
    let nobody = format!("http://127.0.0.1:{}", crate::fixtures::free_port());
    let (code, _, err) = sluice(&["connectors", "list", "--url", &nobody], &[]).await;
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains(&format!("cannot reach the worker at {nobody}")),
        "{err}"
    );
    let (code, _, err) = sluice(&["plugins"], &[("SLUICE_URL", nobody.as_str())]).await;
    assert_eq!(code, 3, "{err}");
    let (code, _, err) = sluice(&["connectors", "list", "--url", "localhost:8083"], &[]).await;
    assert_eq!(code, 2, "{err}");
    env.worker.shutdown().await;
}

/// `sluice validate FILE` runs the validate endpoint's checks offline: the
/// same report (`--output json` equals the endpoint's answer), exit 0 when
/// valid, 1 with errors, 2 when the file is unreadable or not JSON.
#[tokio::test(flavor = "multi_thread")]
async fn validate_offline_gives_the_endpoints_answer() {
    let env = InProcess::start();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: &Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p.display().to_string()
    };
    let fake = dir.path().join("fake.wasm");
    std::fs::write(&fake, "not wasm").unwrap();
    let cases = [
        (json!({"topic": "t", "rate": "5"}), "datagen", 0),
        (json!({"topic": "t", "rate": "fast"}), "datagen", 1),
        (
            json!({"topic": "t", "transforms": "x", "transforms.x.type": "wasm", "transforms.x.module": fake.display().to_string()}),
            "datagen",
            1,
        ),
        (
            json!({"topics": "t", "connection.url": "jdbc:sqlite:/tmp/x.db", "insert.mode": "upsert", "connection.password": "p"}),
            "jdbc-sink",
            1,
        ),
    ];
    for (i, (config, class, expected)) in cases.iter().enumerate() {
        let mut full = config.clone();
        full["connector.class"] = json!(class);
        full["name"] = json!("validate");
        let (_, from_rest) = call(
            &env,
            "PUT",
            &format!("/connector-plugins/{class}/config/validate"),
            Some(full.clone()),
        )
        .await;
        let file = write(
            &format!("c{i}.json"),
            &json!({"name": "validate", "config": full}),
        );
        let (code, out, err) = sluice(&["validate", &file, "--output", "json"], &[]).await;
        assert_eq!(code, *expected, "{out}{err}");
        let offline: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(offline, from_rest, "the CLI and the endpoint agree");
        let (code, out, _) = sluice(&["validate", &file], &[]).await;
        assert_eq!(code, *expected);
        if *expected == 0 {
            assert!(out.contains("valid (datagen"), "{out}");
        } else {
            assert!(out.starts_with("KEY"), "{out}");
        }
    }
    let (_, out, _) = sluice(&["validate", &write("r.json", &json!({"name": "r", "config": {"connector.class": "datagen", "topic": "t", "rate": "fast"}}))], &[]).await;
    assert!(
        out.lines()
            .any(|l| l.starts_with("rate") && l.contains("expected a number")),
        "{out}"
    );

    // A flat config, an unknown class, files that cannot be used.
    let flat = write(
        "flat.json",
        &json!({"name": "f", "connector.class": "datagen", "topic": "t"}),
    );
    assert_eq!(sluice(&["validate", &flat], &[]).await.0, 0);
    let unknown = write(
        "u.json",
        &json!({"name": "u", "config": {"connector.class": "nope"}}),
    );
    let (code, out, _) = sluice(&["validate", &unknown], &[]).await;
    assert_eq!(code, 1);
    assert!(
        out.contains("connector.class") && out.contains("nope"),
        "{out}"
    );
    let not_json = dir.path().join("n.json");
    std::fs::write(&not_json, "{nope").unwrap();
    let (code, _, err) = sluice(&["validate", &not_json.display().to_string()], &[]).await;
    assert_eq!(code, 2);
    assert!(err.contains("not valid JSON"), "{err}");
    let (code, _, err) = sluice(&["validate", "/nonexistent/c.json"], &[]).await;
    assert_eq!(
        (code, err.contains("reading /nonexistent/c.json")),
        (2, true),
        "{err}"
    );
    env.worker.shutdown().await;
}

/// `initial_state` on `POST /connectors`: the connector is created directly
/// PAUSED (tasks paused, nothing produced) or STOPPED (no tasks), and the
/// state is persisted like any other target state.
#[tokio::test(flavor = "multi_thread")]
async fn connectors_are_created_in_their_initial_state() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("connectors.json");
    let env = InProcess::start_with_store(store.clone());
    let stored_state = |name: &str| {
        let text = std::fs::read_to_string(&store).unwrap();
        serde_json::from_str::<Value>(&text).unwrap()[name]["state"].clone()
    };
    let with_state = |name: &str, state: &str| {
        let mut body = source(name);
        body["initial_state"] = json!(state);
        body
    };

    // PAUSED: one task, paused from the start; the source produces nothing.
    let (s, b) = call(&env, "POST", "/connectors", Some(with_state("p", "PAUSED"))).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["tasks"], json!([{"connector": "p", "task": 0}]));
    crate::fixtures::eventually(Duration::from_secs(60), "p PAUSED", || async {
        let (_, st) = call(&env, "GET", "/connectors/p/status", None).await;
        (st["connector"]["state"] == "PAUSED" && st["tasks"][0]["state"] == "PAUSED").then_some(())
    })
    .await;
    assert_eq!(stored_state("p"), "PAUSED");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (_, o) = call(&env, "GET", "/connectors/p/offsets", None).await;
    assert_eq!(
        o,
        json!({"offsets": []}),
        "a paused source produced nothing"
    );
    assert_eq!(
        call(&env, "PUT", "/connectors/p/resume", None).await.0,
        StatusCode::ACCEPTED
    );
    crate::fixtures::eventually(
        Duration::from_secs(60),
        "p producing once resumed",
        || async {
            let (_, o) = call(&env, "GET", "/connectors/p/offsets", None).await;
            (!o["offsets"].as_array()?.is_empty()).then_some(())
        },
    )
    .await;
    assert_eq!(stored_state("p"), "RUNNING");

    // STOPPED: no tasks, as after PUT .../stop; offsets may be changed; resume starts them.
    let (s, b) = call(
        &env,
        "POST",
        "/connectors",
        Some(with_state("s", "STOPPED")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    assert_eq!(b["tasks"], json!([]));
    let (_, st) = call(&env, "GET", "/connectors/s/status", None).await;
    assert_eq!(
        (st["connector"]["state"].as_str(), st["tasks"].clone()),
        (Some("STOPPED"), json!([])),
        "{st}"
    );
    assert_eq!(stored_state("s"), "STOPPED");
    let (s, _) = call(&env, "DELETE", "/connectors/s/offsets", None).await;
    assert_eq!(s, StatusCode::OK, "offsets can be changed: it is STOPPED");
    let (s, b) = call(&env, "PUT", "/connectors/s/pause", None).await;
    assert_error(s, &b, 409, "STOPPED");
    assert_eq!(
        call(&env, "PUT", "/connectors/s/resume", None).await.0,
        StatusCode::ACCEPTED
    );
    crate::fixtures::eventually(Duration::from_secs(60), "s RUNNING", || async {
        let (_, st) = call(&env, "GET", "/connectors/s/status", None).await;
        (st["connector"]["state"] == "RUNNING" && st["tasks"][0]["state"] == "RUNNING")
            .then_some(())
    })
    .await;

    // RUNNING, explicitly.
    let (s, _) = call(
        &env,
        "POST",
        "/connectors",
        Some(with_state("r", "RUNNING")),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(stored_state("r"), "RUNNING");
    // A name taken is a 409 whatever the state asked.
    let (s, b) = call(
        &env,
        "POST",
        "/connectors",
        Some(with_state("r", "STOPPED")),
    )
    .await;
    assert_error(s, &b, 409, "already exists");
    env.worker.shutdown().await;
}

/// RESTARTING: a restart with `includeTasks`/`onlyFailed` answers 202 with
/// what it restarts shown RESTARTING, until it runs again; `onlyFailed`
/// restarts only FAILED tasks; a plain restart keeps the connector visible.
#[tokio::test(flavor = "multi_thread")]
async fn restarts_show_restarting_until_running() {
    use std::time::Duration;
    let env = InProcess::start();
    let (s, _) = call(&env, "POST", "/connectors", Some(source("rs"))).await;
    assert_eq!(s, StatusCode::CREATED);
    let running = |name: &'static str| {
        let env = &env;
        move || async move {
            let (_, st) = call(env, "GET", &format!("/connectors/{name}/status"), None).await;
            (st["connector"]["state"] == "RUNNING"
                && st["tasks"]
                    .as_array()?
                    .iter()
                    .all(|t| t["state"] == "RUNNING"))
            .then_some(st)
        }
    };
    crate::fixtures::eventually(Duration::from_secs(60), "rs RUNNING", running("rs")).await;

    // The connector and all its tasks.
    let (s, b) = call(
        &env,
        "POST",
        "/connectors/rs/restart?includeTasks=true",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert_eq!(b["connector"]["state"], "RESTARTING", "{b}");
    assert_eq!(b["tasks"][0]["state"], "RESTARTING", "{b}");
    let st =
        crate::fixtures::eventually(Duration::from_secs(60), "rs RUNNING again", running("rs"))
            .await;
    assert_eq!(st["tasks"].as_array().unwrap().len(), 1, "{st}");

    // Only failed: nothing is, nothing restarts.
    let (s, b) = call(
        &env,
        "POST",
        "/connectors/rs/restart?includeTasks=true&onlyFailed=true",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert_eq!(
        (
            b["connector"]["state"].as_str(),
            b["tasks"][0]["state"].as_str()
        ),
        (Some("RUNNING"), Some("RUNNING")),
        "{b}"
    );

    // A plain restart: 204, and the connector is never gone meanwhile.
    let restart = {
        let herder = env.herder.clone();
        tokio::spawn(async move {
            let r = sluice_runtime::rest::router(herder)
                .oneshot(
                    Request::post("/connectors/rs/restart")
                        .body(Body::empty())
                        .unwrap(),
                )
                .await
                .unwrap();
            r.status()
        })
    };
    let mut seen = std::collections::BTreeSet::new();
    while !restart.is_finished() {
        let (s, st) = call(&env, "GET", "/connectors/rs/status", None).await;
        assert_eq!(s, StatusCode::OK, "{st}");
        seen.insert(st["connector"]["state"].as_str().unwrap().to_string());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(restart.await.unwrap(), StatusCode::NO_CONTENT);
    assert!(
        seen.iter().all(|s| s == "RUNNING" || s == "RESTARTING"),
        "{seen:?}"
    );
    crate::fixtures::eventually(
        Duration::from_secs(60),
        "rs RUNNING after the restart",
        running("rs"),
    )
    .await;

    // A FAILED task: onlyFailed restarts it alone (it fails again: the
    // poison record is still there).
    env.broker.create_topic("poison", 1).await.unwrap();
    crate::fixtures::produce(
        env.broker.bootstrap_servers(),
        "poison",
        &[(None, b"{\"order_id\": 3, trunc")],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let sink = json!({"name": "bad", "config": {
        "connector.class": "jdbc-sink", "topics": "poison",
        "connection.url": format!("jdbc:sqlite:{}", dir.path().join("x.db").display()),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id", "auto.create": "true"
    }});
    assert_eq!(
        call(&env, "POST", "/connectors", Some(sink)).await.0,
        StatusCode::CREATED
    );
    env.failed_trace("bad").await;
    let (s, b) = call(
        &env,
        "POST",
        "/connectors/bad/restart?includeTasks=true&onlyFailed=true",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert_eq!(
        (
            b["connector"]["state"].as_str(),
            b["tasks"][0]["state"].as_str()
        ),
        (Some("RUNNING"), Some("RESTARTING")),
        "{b}"
    );
    // RESTARTING until it runs (a consumer rejoining its group can take the
    // session timeout, so it is not waited for to fail again).
    crate::fixtures::eventually(Duration::from_secs(60), "bad's task restarted", || async {
        let (_, st) = call(&env, "GET", "/connectors/bad/status", None).await;
        (st["tasks"][0]["state"] != "RESTARTING").then_some(())
    })
    .await;
    assert_eq!(
        call(&env, "POST", "/connectors/bad/tasks/0/restart", None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let (_, st) = call(&env, "GET", "/connectors/bad/status", None).await;
    assert!(
        ["RESTARTING", "RUNNING"].contains(&st["tasks"][0]["state"].as_str().unwrap()),
        "{st}"
    );

    // STOPPED: nothing to restart.
    assert_eq!(
        call(&env, "PUT", "/connectors/rs/stop", None).await.0,
        StatusCode::NO_CONTENT
    );
    let (s, b) = call(
        &env,
        "POST",
        "/connectors/rs/restart?includeTasks=true",
        None,
    )
    .await;
    assert_error(s, &b, 409, "STOPPED");
    env.worker.shutdown().await;
}

/// Basic authentication: 401 with `WWW-Authenticate` without credentials or
/// with wrong ones, through with a user of the file; `/health` optionally
/// open; plain-text passwords refused when the file is loaded.
#[tokio::test(flavor = "multi_thread")]
async fn basic_auth_guards_the_api() {
    use base64::Engine;
    use sluice_runtime::auth::{BasicAuth, hash_password};
    use std::sync::Arc;
    let env = InProcess::start();
    let users = format!(
        "# REST users\nalice:{}\n\nbob:{}\n",
        hash_password("s3cret").unwrap(),
        hash_password("hunter2").unwrap()
    );
    let send = |health_open: bool, uri: &'static str, auth: Option<String>| {
        let users = users.clone();
        let herder = env.herder.clone();
        async move {
            let app = sluice_runtime::auth::protect(
                sluice_runtime::rest::router(herder),
                Arc::new(BasicAuth::parse(&users, health_open).unwrap()),
            );
            let mut req = Request::get(uri);
            if let Some(a) = auth {
                req = req.header(header::AUTHORIZATION, a);
            }
            let r = app.oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
            let challenge = r
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .map(|v| v.to_str().unwrap().to_string());
            let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
                .await
                .unwrap();
            (
                challenge,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
    let basic = |creds: &str| {
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(creds)
        ))
    };

    let (challenge, body) = send(false, "/connectors", None).await;
    assert_eq!(
        challenge.as_deref(),
        Some("Basic realm=\"sluice\", charset=\"UTF-8\"")
    );
    assert_eq!(body["error_code"], 401, "{body}");
    let (challenge, body) = send(false, "/connectors", basic("alice:wrong")).await;
    assert!(challenge.is_some());
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("wrong user name or password"),
        "{body}"
    );
    let (challenge, _) = send(false, "/connectors", basic("mallory:s3cret")).await;
    assert!(challenge.is_some(), "an unknown user is refused");
    let (challenge, _) = send(false, "/connectors", Some("Bearer abc".into())).await;
    assert!(challenge.is_some());
    let (challenge, body) = send(false, "/connectors", basic("alice:s3cret")).await;
    assert_eq!((challenge, body), (None, json!([])));
    let (challenge, body) = send(false, "/connectors", basic("bob:hunter2")).await;
    assert_eq!((challenge, body), (None, json!([])));
    // /health: closed by default, open when asked.
    assert!(send(false, "/health", None).await.0.is_some());
    let (challenge, body) = send(true, "/health", None).await;
    assert_eq!(
        (challenge, body["status"].as_str()),
        (None, Some("healthy"))
    );
    assert!(send(true, "/connectors", None).await.0.is_some());

    // The users file: hashes only.
    let e = BasicAuth::parse("alice:s3cret\n", false).err().unwrap();
    assert!(
        e.contains("line 1")
            && e.contains("not an Argon2 hash")
            && e.contains("sluice passwd alice"),
        "{e}"
    );
    let e = BasicAuth::parse("# nobody\n", false).err().unwrap();
    assert!(e.contains("no users"), "{e}");
    let e = BasicAuth::parse(
        &format!("{users}alice:{}\n", hash_password("x").unwrap()),
        false,
    )
    .err()
    .unwrap();
    assert!(e.contains("appears twice"), "{e}");
    env.worker.shutdown().await;
}

/// A standalone worker with `rest.auth.users.file`, driven by the CLI with
/// `--user`/`SLUICE_USER`; a users file with a plain-text password is refused
/// at start.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_with_basic_auth_and_the_cli() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = sluice_with_stdin(&["passwd", "alice"], "s3cret\n").await;
    assert_eq!(code, 0);
    assert!(out.starts_with("alice:$argon2id$"), "{out}");
    let users = dir.path().join("users");
    std::fs::write(&users, &out).unwrap();
    let port = crate::fixtures::free_port();
    let worker = dir.path().join("worker.json");
    std::fs::write(
        &worker,
        json!({"listeners": format!("http://127.0.0.1:{port}"), "rest.auth.users.file": users.display().to_string(),
               "rest.auth.health.open": "true", "wasm.cache.dir": ""})
        .to_string(),
    )
    .unwrap();
    let _process = crate::fixtures::SluiceProcess::start(dir.path(), &[worker.as_path()]);
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    crate::fixtures::eventually(Duration::from_secs(60), "the worker's /health", || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.get(format!("{url}/health")).send().await.ok()?;
            (r.status() == 200).then_some(())
        }
    })
    .await;
    let (code, out, err) = sluice(
        &[
            "connectors",
            "list",
            "--url",
            &url,
            "--user",
            "alice:s3cret",
        ],
        &[],
    )
    .await;
    assert_eq!((code, out.trim()), (0, "no connectors"), "{err}");
    let (code, out, _) = sluice(
        &["plugins", "--url", &url],
        &[("SLUICE_USER", "alice:s3cret")],
    )
    .await;
    assert_eq!(code, 0);
    assert!(out.contains("datagen"), "{out}");
    let (code, _, err) = sluice(&["connectors", "list", "--url", &url], &[]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains("authentication required") && err.contains("HTTP 401"),
        "{err}"
    );
    let (code, _, err) = sluice(
        &["connectors", "list", "--url", &url, "--user", "alice:nope"],
        &[],
    )
    .await;
    assert_eq!((code, err.contains("HTTP 401")), (1, true), "{err}");

    let plain = dir.path().join("plain");
    std::fs::write(&plain, "alice:s3cret\n").unwrap();
    let bad_worker = dir.path().join("bad-worker.json");
    std::fs::write(
        &bad_worker,
        json!({"listeners": format!("http://127.0.0.1:{}", crate::fixtures::free_port()), "rest.auth.users.file": plain.display().to_string()})
            .to_string(),
    )
    .unwrap();
    let (code, err) = crate::fixtures::sluice_rejects(dir.path(), &[bad_worker.as_path()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("rest.auth.users.file")
            && err.contains("line 1")
            && err.contains("not an Argon2 hash"),
        "{err}"
    );
}

async fn sluice_with_stdin(args: &[&str], input: &str) -> (i32, String, String) {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .await
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An `https://` listener with a self-signed certificate: the CLI trusts it
/// with `--ca-cert` (and is refused without), combined with basic auth; a
/// missing key file is refused at start, naming the key.
#[tokio::test(flavor = "multi_thread")]
async fn an_https_listener_with_the_cli() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.key_pair.serialize_pem()).unwrap();
    let users = dir.path().join("users");
    std::fs::write(
        &users,
        format!(
            "ops:{}\n",
            sluice_runtime::auth::hash_password("pw").unwrap()
        ),
    )
    .unwrap();
    let port = crate::fixtures::free_port();
    let worker = dir.path().join("worker.json");
    std::fs::write(
        &worker,
        json!({"listeners": format!("https://localhost:{port}"),
               "listeners.https.ssl.certificate.location": cert_file.display().to_string(),
               "listeners.https.ssl.key.location": key_file.display().to_string(),
               "rest.auth.users.file": users.display().to_string(), "wasm.cache.dir": ""})
        .to_string(),
    )
    .unwrap();
    let process = crate::fixtures::SluiceProcess::start(dir.path(), &[worker.as_path()]);
    let url = format!("https://localhost:{port}");
    let ca = cert_file.display().to_string();
    let log = process.log.clone();
    crate::fixtures::eventually(Duration::from_secs(60), "the https worker", || {
        let log = log.clone();
        async move {
            std::fs::read_to_string(&log)
                .ok()?
                .contains("worker started")
                .then_some(())
        }
    })
    .await;
    assert!(
        process.log_text().contains("rest=https://"),
        "{}",
        process.log_text()
    );
    // A connection that never starts its handshake is closed after
    // sluice_runtime::tls::HANDSHAKE_TIMEOUT, not held open for ever.
    let mut silent = tokio::net::TcpStream::connect(("localhost", port))
        .await
        .unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(
        Duration::from_secs(40),
        tokio::io::AsyncReadExt::read(&mut silent, &mut byte),
    )
    .await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "a silent connection was kept open: {read:?}"
    );
    let (code, out, err) = sluice(
        &[
            "connectors",
            "list",
            "--url",
            &url,
            "--ca-cert",
            &ca,
            "--user",
            "ops:pw",
        ],
        &[],
    )
    .await;
    assert_eq!((code, out.trim()), (0, "no connectors"), "{err}");
    let (code, _, err) = sluice(
        &["connectors", "list", "--url", &url, "--ca-cert", &ca],
        &[],
    )
    .await;
    assert_eq!((code, err.contains("HTTP 401")), (1, true), "{err}");
    // Without trusting the certificate: no answer to trust, exit 3.
    let (code, _, err) = sluice(
        &["connectors", "list", "--url", &url, "--user", "ops:pw"],
        &[],
    )
    .await;
    assert_eq!(code, 3, "{err}");
    // Plain HTTP to the TLS port gets no HTTP answer.
    let (code, _, _) = sluice(
        &[
            "connectors",
            "list",
            "--url",
            &format!("http://localhost:{port}"),
            "--user",
            "ops:pw",
        ],
        &[],
    )
    .await;
    assert_ne!(code, 0);

    // Misconfigurations are named at start.
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        json!({"listeners": format!("https://localhost:{}", crate::fixtures::free_port()),
               "listeners.https.ssl.certificate.location": cert_file.display().to_string(),
               "listeners.https.ssl.key.location": dir.path().join("nope.pem").display().to_string()})
        .to_string(),
    )
    .unwrap();
    let (code, err) = crate::fixtures::sluice_rejects(dir.path(), &[bad.as_path()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("listeners.https.ssl.key.location") && err.contains("nope.pem"),
        "{err}"
    );
    std::fs::write(
        &bad,
        json!({"listeners": format!("https://localhost:{}", crate::fixtures::free_port())})
            .to_string(),
    )
    .unwrap();
    let (code, err) = crate::fixtures::sluice_rejects(dir.path(), &[bad.as_path()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("listeners.https.ssl.certificate.location"),
        "{err}"
    );
}

/// A secret is hidden wherever it appears, not only under a key named like
/// one: inside a connection URL, a JAAS config, another key's value, an
/// error message of validate.
#[tokio::test(flavor = "multi_thread")]
async fn secrets_are_hidden_by_value_in_every_answer() {
    let env = InProcess::start();
    let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="Jaas9secret";"#;
    let config = json!({
        "connector.class": "jdbc-sink", "topics": "secret-t",
        "connection.url": "jdbc:postgresql://app:Hunter2secret@127.0.0.1:1/db?sslpassword=Query7secret",
        "connection.password": "Hunter2secret",
        "consumer.override.sasl.jaas.config": jaas,
        "table.name.format": "audit_Hunter2secret",
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id"
    });
    let (s, b) = call(
        &env,
        "POST",
        "/connectors",
        Some(json!({"name": "db", "config": config})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let mut invalid = config.clone();
    invalid["connection.url"] = json!("jdbc:oracle:thin:app/Hunter2secret@db:1521/x");
    let mut answers = Vec::new();
    for (method, path, body) in [
        ("GET", "/connectors/db", None),
        ("GET", "/connectors/db/config", None),
        ("GET", "/connectors/db/tasks", None),
        ("GET", "/connectors?expand=info&expand=status", None),
        (
            "PUT",
            "/connector-plugins/jdbc-sink/config/validate",
            Some(config.clone()),
        ),
        (
            "PUT",
            "/connector-plugins/jdbc-sink/config/validate",
            Some(invalid),
        ),
    ] {
        let (status, body) = call(&env, method, path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {body}");
        answers.push((format!("{method} {path}"), body.to_string()));
    }
    for (request, body) in &answers {
        for secret in ["Hunter2secret", "Jaas9secret", "Query7secret"] {
            assert!(!body.contains(secret), "{request} shows `{secret}`: {body}");
        }
    }
    // What is not secret is still shown.
    let (_, config) = call(&env, "GET", "/connectors/db/config", None).await;
    assert_eq!(config["topics"], "secret-t");
    assert!(
        config["connection.url"]
            .as_str()
            .unwrap()
            .starts_with("jdbc:postgresql://app:[hidden]@127.0.0.1:1/db"),
        "{config}"
    );
    env.worker.shutdown().await;
}
