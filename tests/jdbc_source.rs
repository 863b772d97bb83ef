//! `jdbc-source` against real databases (PostgreSQL from
//! `scripts/postgres.sh`, SQLite files, MariaDB when installed): each
//! mode, Confluent's offsets (read, resumed, moved in from Kafka Connect),
//! typed values with JsonConverter schemas, and configs that must fail.

use std::time::Duration;

use rdkafka::Message;
use serde_json::{Value, json};
use sluice_runtime::config::ConnectorSpec;
use sluice_runtime::worker::TargetState;

use crate::fixtures::{self, InProcess, MariaDbInstance, eventually};
use crate::postgres::postgres_url;

fn source(name: &str, url: &str, extra: Value) -> Value {
    let mut config = json!({
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "connection.url": format!("jdbc:{}", url.replace("postgres://", "postgresql://")),
        "poll.interval.ms": "200",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    });
    for (k, v) in extra.as_object().expect("an object") {
        config[k] = v.clone();
    }
    json!({"name": name, "config": config})
}

/// Every record of `topic` once it holds at least `n`: (schema, payload).
async fn rows(env: &InProcess, topic: &str, n: usize) -> Vec<(Value, Value)> {
    fixtures::topic_records(env.broker.bootstrap_servers(), topic, n, topic)
        .await
        .iter()
        .map(|m| {
            assert!(m.key().is_none(), "the JDBC source writes no key");
            let v: Value = serde_json::from_slice(m.payload().expect("a value")).unwrap();
            (v["schema"].clone(), v["payload"].clone())
        })
        .collect()
}

fn ids(rows: &[(Value, Value)]) -> Vec<i64> {
    rows.iter()
        .map(|(_, p)| p["id"].as_i64().unwrap())
        .collect()
}

async fn source_offsets(env: &InProcess, name: &str) -> Vec<Value> {
    env.herder
        .offsets(name)
        .await
        .unwrap()
        .expect("a known connector")
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_source_timestamp_incrementing_on_postgres_with_confluent_offsets() {
    let Some(base) = postgres_url() else { return };
    let url = fixtures::fresh_pg_database(&base, "jdbcsrc").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2),
           updated_at timestamp NOT NULL DEFAULT (now() AT TIME ZONE 'UTC'), born date, raw bytea);
         CREATE TABLE ignored (id serial PRIMARY KEY);
         INSERT INTO items (name, price, updated_at, born, raw) VALUES
           ('ann', 12.5, '2026-01-01 00:00:00.123456', '2000-02-29', '\\x0102'),
           ('bob', NULL, '2026-01-01 00:00:00.123456', NULL, NULL),
           ('cy', -0.05, '2026-01-02 00:00:00', NULL, NULL);",
    )
    .await;
    let env = InProcess::start();
    let config = json!({
        "mode": "timestamp+incrementing",
        "table.whitelist": "items",
        "timestamp.column.name": "updated_at",
        "incrementing.column.name": "id",
        "topic.prefix": "pg-",
    });
    env.create(source("items-src", &url, config.clone())).await;

    let first = rows(&env, "pg-items", 3).await;
    assert_eq!(ids(&first), [1, 2, 3], "in (timestamp, id) order");
    let (schema, ann) = &first[0];
    assert_eq!(schema["type"], "struct");
    assert_eq!(
        schema["name"], "items",
        "the value schema is named after the table"
    );
    let field = |name: &str| {
        schema["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"] == name)
            .unwrap_or_else(|| panic!("no field {name} in {schema}"))
            .clone()
    };
    assert_eq!(field("id")["type"], "int32");
    assert_eq!(field("id")["optional"], false);
    assert_eq!(field("name")["type"], "string");
    assert_eq!(
        field("price")["name"],
        "org.apache.kafka.connect.data.Decimal"
    );
    assert_eq!(field("price")["parameters"]["scale"], "2");
    assert_eq!(field("price")["optional"], true);
    assert_eq!(
        field("updated_at")["name"],
        "org.apache.kafka.connect.data.Timestamp"
    );
    assert_eq!(field("born")["name"], "org.apache.kafka.connect.data.Date");
    assert_eq!(field("raw")["type"], "bytes");
    // JsonConverter's forms: decimals as base64 of the unscaled value,
    // dates in days, timestamps in milliseconds, bytes in base64.
    assert_eq!(ann["name"], "ann");
    assert_eq!(ann["price"], "BOI=", "1250 unscaled, big-endian");
    assert_eq!(ann["updated_at"], 1_767_225_600_123_i64);
    assert_eq!(ann["born"], 11_016);
    assert_eq!(ann["raw"], "AQI=");
    assert_eq!(first[1].1["price"], Value::Null);

    // Confluent's offset: protocol 1, the table's full name.
    let offsets = eventually(
        Duration::from_secs(30),
        "the offsets to be committed",
        || async {
            let o = source_offsets(&env, "items-src").await;
            (o.first().is_some_and(|e| e["offset"]["incrementing"] == 3)).then_some(o)
        },
    )
    .await;
    assert_eq!(
        offsets,
        [json!({
            "partition": {"protocol": "1", "table": "jdbcsrc.public.items"},
            "offset": {"incrementing": 3, "timestamp": 1_767_312_000_000_i64, "timestamp_nanos": 0},
        })]
    );

    // An update (a newer timestamp) and an insert are read; an old row
    // that is not touched is not read again.
    fixtures::pg_script(
        &url,
        "UPDATE items SET name = 'ann2', updated_at = '2026-01-03 00:00:00' WHERE id = 1;
         INSERT INTO items (name, updated_at) VALUES ('dee', '2026-01-03 00:00:00');",
    )
    .await;
    let second = rows(&env, "pg-items", 5).await;
    assert_eq!(ids(&second), [1, 2, 3, 1, 4]);
    assert_eq!(second[3].1["name"], "ann2");

    // A restart resumes from the stored offset: nothing read twice.
    env.herder.delete("items-src").await.unwrap();
    fixtures::pg_script(
        &url,
        "INSERT INTO items (name, updated_at) VALUES ('eve', '2026-01-04 00:00:00')",
    )
    .await;
    env.create(source("items-src", &url, config.clone())).await;
    let third = rows(&env, "pg-items", 6).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let third_settled = rows(&env, "pg-items", 6).await;
    assert_eq!(ids(&third), [1, 2, 3, 1, 4, 5]);
    assert_eq!(
        third_settled.len(),
        6,
        "a restart read a row twice: {:?}",
        ids(&third_settled)
    );

    // Moved from Kafka Connect: a connector created STOPPED, given the
    // offset Kafka Connect stored (PATCH /offsets), starts after it.
    let mut moved = source("moved", &url, config.clone());
    moved["config"]["topic.prefix"] = json!("moved-");
    let spec = ConnectorSpec::from_json(&moved).unwrap();
    env.herder
        .create(&spec, TargetState::Stopped)
        .await
        .unwrap();
    env.herder
        .alter_offsets(
            "moved",
            Some(vec![json!({
                "partition": {"protocol": "1", "table": "jdbcsrc.public.items"},
                "offset": {"incrementing": 4, "timestamp": 1_767_398_400_000_i64, "timestamp_nanos": 0},
            })]),
        )
        .await
        .unwrap();
    env.herder
        .set_target("moved", TargetState::Running)
        .await
        .unwrap();
    let moved_rows = rows(&env, "moved-items", 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let moved_rows_settled = rows(&env, "moved-items", 1).await;
    assert_eq!(
        ids(&moved_rows),
        [5],
        "only what came after Kafka Connect's offset"
    );
    assert_eq!(moved_rows_settled.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_source_timestamp_mode_waits_out_the_delay_on_postgres() {
    let Some(base) = postgres_url() else { return };
    let url = fixtures::fresh_pg_database(&base, "jdbcsrc_delay").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE ticks (id int PRIMARY KEY, at timestamptz NOT NULL);
         INSERT INTO ticks VALUES (1, now() - interval '1 hour');",
    )
    .await;
    let env = InProcess::start();
    env.create(source(
        "ticks-src",
        &url,
        json!({
            "mode": "timestamp",
            "table.whitelist": "public.ticks",
            "timestamp.column.name": "at",
            "timestamp.delay.interval.ms": "3000",
            "topic.prefix": "",
            "value.converter.schemas.enable": "false",
        }),
    ))
    .await;
    let read = |n| {
        let env = &env;
        async move {
            fixtures::topic_records(env.broker.bootstrap_servers(), "ticks", n, "ticks")
                .await
                .iter()
                .map(|m| {
                    serde_json::from_slice::<Value>(m.payload().unwrap()).unwrap()["id"]
                        .as_i64()
                        .unwrap()
                })
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(read(1).await, [1]);
    // A row stamped now is held back until it is 3 s old.
    fixtures::pg_script(&url, "INSERT INTO ticks VALUES (2, now())").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        read(1).await,
        [1],
        "a row younger than timestamp.delay.interval.ms was read"
    );
    assert_eq!(read(2).await, [1, 2]);
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_source_bulk_incrementing_and_query_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("src.db");
    let url = format!("sqlite:{}", path.display());
    {
        use sqlx::Connection;
        let mut conn =
            sqlx::SqliteConnection::connect(&format!("sqlite://{}?mode=rwc", path.display()))
                .await
                .unwrap();
        sqlx::raw_sql(
            "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL, active BOOLEAN);
             CREATE TABLE colours (name TEXT);
             INSERT INTO users (name, score, active) VALUES ('ann', 1.5, 1), ('bob', NULL, 0);
             INSERT INTO colours VALUES ('red'), ('blue');",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
    }
    let env = InProcess::start();
    // incrementing: the INTEGER PRIMARY KEY found as the column, and a
    // Kafka Connect offset of protocol 0 (the bare table name) honoured.
    let inc = source(
        "users-src",
        &url,
        json!({"mode": "incrementing", "table.whitelist": "users", "topic.prefix": "lite-"}),
    );
    let spec = ConnectorSpec::from_json(&inc).unwrap();
    env.herder
        .create(&spec, TargetState::Stopped)
        .await
        .unwrap();
    env.herder
        .alter_offsets(
            "users-src",
            Some(vec![
                json!({"partition": {"table": "users"}, "offset": {"incrementing": 1}}),
            ]),
        )
        .await
        .unwrap();
    env.herder
        .set_target("users-src", TargetState::Running)
        .await
        .unwrap();
    let users = rows(&env, "lite-users", 1).await;
    assert_eq!(ids(&users), [2]);
    assert_eq!(
        users[0].1,
        json!({"id": 2, "name": "bob", "score": null, "active": false})
    );
    let fields: Vec<(String, String)> = users[0].0["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["field"].as_str().unwrap().into(),
                f["type"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            ("id".into(), "int64".into()),
            ("name".into(), "string".into()),
            ("score".into(), "double".into()),
            ("active".into(), "boolean".into())
        ]
    );
    {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        sqlx::raw_sql("INSERT INTO users (name) VALUES ('cy')")
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }
    assert_eq!(ids(&rows(&env, "lite-users", 2).await), [2, 3]);

    // bulk: the whole table at every poll, and no offset stored.
    env.create(source(
        "colours-src",
        &url,
        json!({"mode": "bulk", "table.whitelist": "colours", "topic.prefix": "lite-", "poll.interval.ms": "300"}),
    ))
    .await;
    let colours = rows(&env, "lite-colours", 4).await;
    let names: Vec<&str> = colours
        .iter()
        .map(|(_, p)| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[..4], ["red", "blue", "red", "blue"]);
    assert!(
        source_offsets(&env, "colours-src").await.is_empty(),
        "bulk stores no offset"
    );

    // query: into the topic topic.prefix, offsets under {"query": "query"}.
    env.create(source(
        "query-src",
        &url,
        json!({
            "mode": "incrementing",
            "query": "SELECT id, upper(name) AS shout FROM users",
            "incrementing.column.name": "id",
            "topic.prefix": "shouts",
        }),
    ))
    .await;
    let shouts = rows(&env, "shouts", 3).await;
    assert_eq!(
        shouts
            .iter()
            .map(|(_, p)| p["shout"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["ANN", "BOB", "CY"]
    );
    let offsets = eventually(Duration::from_secs(30), "the query's offset", || async {
        let o = source_offsets(&env, "query-src").await;
        (o.first().is_some_and(|e| e["offset"]["incrementing"] == 3)).then_some(o)
    })
    .await;
    assert_eq!(offsets[0]["partition"], json!({"query": "query"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_source_incrementing_on_mariadb() {
    let Some(maria) = MariaDbInstance::start() else {
        return;
    };
    let url = maria.url();
    {
        use sqlx::Connection;
        let mut conn = sqlx::MySqlConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(
            "CREATE TABLE orders (id BIGINT AUTO_INCREMENT PRIMARY KEY, amount DECIMAL(8,3) NOT NULL,
               placed DATETIME(3) NOT NULL, note VARCHAR(20));
             INSERT INTO orders (amount, placed, note) VALUES (1.5, '2026-05-06 07:08:09.010', 'x'), (2, '2026-05-06 07:08:10', NULL);",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
    }
    let env = InProcess::start();
    env.create(source(
        "maria-src",
        &url,
        json!({"mode": "incrementing", "table.whitelist": "orders", "topic.prefix": "maria-"}),
    ))
    .await;
    let orders = rows(&env, "maria-orders", 2).await;
    assert_eq!(ids(&orders), [1, 2]);
    assert_eq!(orders[0].1["amount"], "Bdw=", "1500 unscaled at scale 3");
    assert_eq!(orders[0].1["placed"], 1_778_051_289_010_i64);
    assert_eq!(orders[1].1["note"], Value::Null);
    let offsets = eventually(Duration::from_secs(30), "the offset", || async {
        let o = source_offsets(&env, "maria-src").await;
        (o.first().is_some_and(|e| e["offset"]["incrementing"] == 2)).then_some(o)
    })
    .await;
    let db = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    assert_eq!(
        offsets[0]["partition"],
        json!({"protocol": "1", "table": format!("{db}.orders")})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn jdbc_source_refuses_what_it_cannot_read_by_name() {
    let Some(base) = postgres_url() else { return };
    let url = fixtures::fresh_pg_database(&base, "jdbcsrc_bad").await;
    fixtures::pg_script(
        &url,
        "CREATE TABLE loose (id int, changed timestamp);
         CREATE TABLE two_serials (a serial, b serial);",
    )
    .await;
    let env = InProcess::start();
    let cases = [
        (
            json!({"mode": "incrementing", "table.whitelist": "nosuch", "topic.prefix": "x-"}),
            "table.whitelist names a table that the database does not have (or this user cannot see): `nosuch`",
        ),
        (
            json!({"mode": "timestamp", "table.whitelist": "loose", "timestamp.column.name": "changed", "topic.prefix": "x-"}),
            "timestamp column `changed` of `jdbcsrc_bad.public.loose` is nullable",
        ),
        (
            json!({"mode": "incrementing", "table.whitelist": "loose", "incrementing.column.name": "id", "topic.prefix": "x-"}),
            "column `id` of `jdbcsrc_bad.public.loose` is nullable",
        ),
        (
            json!({"mode": "incrementing", "table.whitelist": "two_serials", "topic.prefix": "x-"}),
            "table `jdbcsrc_bad.public.two_serials` has 2 auto-incremented columns",
        ),
        (
            json!({"mode": "incrementing", "table.whitelist": "loose", "incrementing.column.name": "nope", "topic.prefix": "x-"}),
            "table `jdbcsrc_bad.public.loose` has no column `nope`",
        ),
    ];
    for (i, (config, expected)) in cases.into_iter().enumerate() {
        let name = format!("bad-{i}");
        env.create(source(&name, &url, config)).await;
        let trace = env.failed_trace(&name).await;
        assert!(
            trace.contains(expected),
            "case {i}: expected `{expected}` in: {trace}"
        );
    }
    // Refused before it runs: a mode that needs a column not named.
    let spec = ConnectorSpec::from_json(&source(
        "bad-config",
        &url,
        json!({"mode": "timestamp", "table.whitelist": "loose", "topic.prefix": "x-"}),
    ))
    .unwrap();
    let err = env
        .worker
        .create(&spec)
        .await
        .expect_err("refused")
        .to_string();
    assert!(err.contains("timestamp.column.name"), "{err}");
}
