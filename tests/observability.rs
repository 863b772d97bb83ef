//! A pipeline with poison records, watched the way an operator would: the
//! Prometheus endpoint scraped over HTTP, the loggers changed at run time,
//! JSON logs.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use sluice_connector_datagen::{DatagenConfig, generate};

use crate::fixtures::{self, SluiceProcess};

const COUNT: u64 = 300;

/// `name{labels} value` lines whose name and labels contain all of `needles`, summed.
fn sum(metrics: &str, name: &str, needles: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with(name)
                && (l.as_bytes().get(name.len()) == Some(&b'{')
                    || l.as_bytes().get(name.len()) == Some(&b' '))
        })
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn series<'a>(metrics: &'a str, name: &str) -> Vec<&'a str> {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_what_flowed_and_lag_falls_to_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (rest_port, metrics_port) = (fixtures::free_port(), fixtures::free_port());
    let worker = json!({
        "listeners": format!("http://127.0.0.1:{rest_port}"),
        "metrics.listener": format!("http://127.0.0.1:{metrics_port}"),
        "log.format": "json",
        "consumer.statistics.interval.ms": "100",
        "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string(),
    });
    let source_config = json!({
        "connector.class": "datagen", "topic": "orders", "count": COUNT.to_string(), "rate": "0",
        "seed": "7", "poison.ratio": "0.1",
    });
    let files: Vec<_> = [
        ("worker.json", worker),
        (
            "gen.json",
            json!({"name": "gen", "config": source_config.clone()}),
        ),
    ]
    .into_iter()
    .map(|(n, v)| {
        let p = dir.path().join(n);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    })
    .collect();
    let args: Vec<&std::path::Path> = files.iter().map(|p| p.as_path()).collect();
    let mut sluice = SluiceProcess::start(dir.path(), &args);
    let http = reqwest::Client::new();
    let rest = format!("http://127.0.0.1:{rest_port}");
    let scrape_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let scrape = || {
        let (http, url) = (http.clone(), scrape_url.clone());
        async move { http.get(url).send().await.ok()?.text().await.ok() }
    };

    // The source produces everything first.
    fixtures::eventually(Duration::from_secs(180), "the source's records", || async {
        let m = scrape().await?;
        (sum(
            &m,
            "sluice_records_total",
            &[r#"connector="gen""#, r#"stage="produce""#],
        ) as u64
            == COUNT)
            .then_some(())
    })
    .await;

    // Then a sink, in one-record batches so it visibly lags, created over REST.
    let db = dir.path().join("out.db");
    let sink = json!({
        "connector.class": "jdbc-sink", "topics": "orders", "connection.url": format!("jdbc:sqlite:{}", db.display()),
        "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "order_id", "auto.create": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "batch.max.records": "1",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "orders-dlq",
        "errors.deadletterqueue.context.headers.enable": "true",
    });
    let created = http
        .put(format!("{rest}/connectors/orders-sink/config"))
        .json(&sink)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());

    let cfg = DatagenConfig::parse(
        &source_config
            .as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.as_str() != "connector.class")
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect(),
    )
    .unwrap();
    let poison = (0..COUNT)
        .filter(|s| serde_json::from_slice::<Value>(&generate(&cfg, *s).1).is_err())
        .count() as u64;
    assert!(
        poison > 10,
        "the seed gives a real number of poison records: {poison}"
    );

    let max_lag = std::sync::Arc::new(std::sync::Mutex::new(0.0f64));
    let metrics = fixtures::eventually(Duration::from_secs(180), "the sink to catch up", || {
        let max_lag = max_lag.clone();
        async move {
            let m = scrape().await?;
            let lags: Vec<f64> = series(&m, "sluice_consumer_lag")
                .iter()
                .filter(|l| l.contains(r#"connector="orders-sink""#))
                .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
                .collect();
            {
                let mut seen = max_lag.lock().unwrap();
                *seen = seen.max(lags.iter().sum());
            }
            let consumed = sum(
                &m,
                "sluice_records_total",
                &[r#"connector="orders-sink""#, r#"stage="consume""#],
            ) as u64;
            (consumed == COUNT && lags.len() == 3 && lags.iter().all(|l| *l == 0.0)).then_some(m)
        }
    })
    .await;
    assert!(
        *max_lag.lock().unwrap() > 0.0,
        "the lag was seen before it fell to zero"
    );

    // Counts match what flowed.
    assert_eq!(
        sum(
            &metrics,
            "sluice_records_total",
            &[r#"connector="gen""#, r#"stage="poll""#]
        ) as u64,
        COUNT
    );
    assert_eq!(
        sum(
            &metrics,
            "sluice_dlq_records_total",
            &[r#"connector="orders-sink""#]
        ) as u64,
        poison,
        "DLQ count = poison count"
    );
    assert_eq!(
        sum(
            &metrics,
            "sluice_dlq_records_total",
            &[
                r#"stage="VALUE_CONVERTER""#,
                r#"error_class="MalformedJson""#
            ]
        ) as u64,
        poison,
        "{:?}",
        series(&metrics, "sluice_dlq_records_total")
    );
    assert_eq!(
        sum(
            &metrics,
            "sluice_records_total",
            &[r#"connector="orders-sink""#, r#"stage="dlq""#]
        ) as u64,
        poison
    );
    assert_eq!(
        sum(
            &metrics,
            "sluice_records_total",
            &[r#"connector="orders-sink""#, r#"stage="put""#]
        ) as u64,
        COUNT - poison
    );
    // Every written record had its end-to-end latency observed.
    let observed = sum(
        &metrics,
        "streaming_e2e_latency_seconds_count",
        &[r#"pipeline="orders-sink""#, r#"topic="orders""#],
    );
    assert_eq!(observed as u64, COUNT - poison);
    assert!(metrics.contains(
        r#"streaming_e2e_latency_seconds_bucket{pipeline="orders-sink",topic="orders",le="60"}"#
    ));
    assert!(
        sum(
            &metrics,
            "sluice_rebalances_total",
            &[r#"connector="orders-sink""#]
        ) >= 1.0
    );
    assert_eq!(
        sum(
            &metrics,
            "sluice_assigned_partitions",
            &[r#"connector="orders-sink""#]
        ),
        3.0
    );
    assert_eq!(
        sum(
            &metrics,
            "sluice_task_state",
            &[r#"connector="orders-sink""#, r#"state="RUNNING""#]
        ),
        1.0
    );
    assert!(
        sum(
            &metrics,
            "sluice_batch_size_count",
            &[r#"connector="orders-sink""#]
        ) >= (COUNT - poison) as f64
    );
    // Each write of a batch is timed; a batch read ahead when the
    // scrape came may not be written yet.
    let writes = sum(
        &metrics,
        "sluice_sink_put_batch_seconds_count",
        &[r#"connector="orders-sink""#],
    );
    let batches = sum(
        &metrics,
        "sluice_batch_size_count",
        &[r#"connector="orders-sink""#],
    );
    assert!(
        writes >= 1.0 && writes <= batches,
        "{writes} writes of {batches} batches"
    );
    let rows = fixtures::sqlite_rows(&db, "SELECT count(*) FROM orders").await;
    assert_eq!(rows[0][0].parse::<u64>().unwrap(), COUNT - poison);

    // Log levels change at run time, as with Kafka Connect's /admin/loggers.
    let loggers: Value = http
        .get(format!("{rest}/admin/loggers"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(loggers["root"]["level"], "INFO", "{loggers}");
    let changed: Vec<String> = http
        .put(format!("{rest}/admin/loggers/sluice_runtime::task"))
        .json(&json!({"level": "debug"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(changed, vec!["sluice_runtime::task".to_string()]);
    let sink_logger: Value = http
        .get(format!("{rest}/admin/loggers/sluice_runtime::task::sink"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        sink_logger["level"], "DEBUG",
        "inherited from its parent: {sink_logger}"
    );
    assert!(sink_logger["last_modified"].as_i64().is_some());
    let bad = http
        .put(format!("{rest}/admin/loggers/root"))
        .json(&json!({"level": "LOUD"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);

    let status = sluice.terminate(Duration::from_secs(30));
    assert!(status.success());
    // JSON logs, one object per line, with the task's span fields.
    let log = sluice.log_text();
    let lines: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        lines.len() > 5 && lines.len() == log.lines().count(),
        "every log line is JSON:\n{log}"
    );
    let with_span: BTreeMap<String, Value> = lines
        .iter()
        .filter_map(|l| {
            Some((
                l["span"]["connector"].as_str()?.to_string(),
                l["span"].clone(),
            ))
        })
        .collect();
    assert!(
        with_span.contains_key("orders-sink") && with_span.contains_key("gen"),
        "task spans carry the connector"
    );
}

/// A task's failure counters exist at zero from its start, so dashboards
/// and `rate()` work before the first failure: commit failures; retries,
/// errors and dead letters at every stage; and, for an exactly-once source,
/// each transaction outcome.
#[tokio::test(flavor = "multi_thread")]
async fn failure_counters_are_exported_at_zero_from_the_start() {
    let env = fixtures::InProcess::start();
    env.broker.create_topic("zero-orders", 1).await.unwrap();
    env.create(json!({"name": "zero", "config": {
        "connector.class": "datagen", "topic": "zero-orders", "count": "10", "rate": "0",
        "delivery.guarantee": "exactly-once",
    }}))
    .await;
    fixtures::eventually(Duration::from_secs(60), "the task running", || async {
        let s = env.worker.status("zero").await?;
        (s.tasks.first()?.1.state == sluice_runtime::task::State::Running).then_some(())
    })
    .await;
    let metrics = env.worker.metrics().render();
    let zero = |line: &str| {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing `{line}` in:\n{}",
            series(&metrics, "sluice_commit_failures_total").join("\n")
        )
    };
    zero(r#"sluice_commit_failures_total{connector="zero",task="0"} 0"#);
    for stage in ["TASK_POLL", "KAFKA_PRODUCE", "TRANSFORMATION"] {
        zero(&format!(
            r#"sluice_retries_total{{connector="zero",stage="{stage}",task="0"}} 0"#
        ));
        for counter in ["sluice_errors_total", "sluice_dlq_records_total"] {
            zero(&format!(
                r#"{counter}{{connector="zero",error_class="DataError",stage="{stage}",task="0"}} 0"#
            ));
        }
    }
    for outcome in ["aborted", "ambiguous", "fenced"] {
        zero(&format!(
            r#"sluice_transactions_total{{connector="zero",outcome="{outcome}",task="0"}} 0"#
        ));
    }
    env.worker.shutdown().await;
}
