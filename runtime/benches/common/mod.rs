//! What the benches share: the order records they all measure with, and
//! (in `process`) a `sluice` worker run as a child process.

#![allow(dead_code)] // each bench uses a part

// The `sluice` binary's allocator, so in-process runs measure what it runs.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::time::Duration;

use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use sluice_runtime::config::WorkerConfig;
use sluice_runtime::kafka::{EmbeddedBroker, KafkaClients};
use sluice_runtime::metrics::Metrics;
use sluice_runtime::offsets::OffsetStore;
use sluice_runtime::worker::{Worker, WorkerOptions};
use sluice_sdk::Record;
use sqlx::Connection;

pub mod process;
pub mod spans;

/// An order event as JSON, about 170 bytes.
pub fn order_json(i: usize) -> String {
    format!(
        r#"{{"order_id":{i},"customer_id":"cust-{:05}","amount":{}.{:02},"currency":"EUR","status":"shipped","updated_at":"2026-01-01T00:00:{:02}.000Z"}}"#,
        i % 1000,
        10 + i % 500,
        i % 100,
        i % 60
    )
}

/// The order as a consumed record, keyed by its id.
pub fn order(i: usize) -> Record {
    Record {
        topic: "orders".into(),
        partition: 0,
        offset: i as i64,
        timestamp: Some(1_767_225_600_000),
        key: Some(i.to_string().into_bytes()),
        value: Some(order_json(i).into_bytes()),
        headers: vec![],
        ..Default::default()
    }
}

/// The total callgrind prints at a clean exit ("==PID== Collected : N"),
/// from its output; `Err` says what was there instead.
pub fn callgrind_collected(output: &str) -> Result<u64, String> {
    let collected = output
        .lines()
        .find_map(|l| l.split_once("Collected :").map(|(_, n)| n.trim()))
        .ok_or_else(|| format!("no `Collected` line in callgrind's output:\n{output}"))?;
    collected
        .parse()
        .map_err(|e| format!("callgrind's count {collected:?}: {e}"))
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A worker with the default config against the embedded `broker`, its
/// topics created with `default_partitions`.
pub fn worker(broker: &EmbeddedBroker, default_partitions: i32) -> Worker {
    worker_on(&BenchBroker::Embedded(broker.clone()), default_partitions)
}

/// The broker a bench runs on: librdkafka's mock cluster in this process,
/// or a real Apache Kafka (`scripts/kafka.sh start`, named by
/// `SLUICE_BENCH_KAFKA_BOOTSTRAP`).
#[derive(Clone)]
pub enum BenchBroker {
    Embedded(EmbeddedBroker),
    Real(String),
}

impl BenchBroker {
    /// The real broker of `bench/run.sh`, if it started one.
    pub fn real_from_env() -> Option<Self> {
        std::env::var("SLUICE_BENCH_KAFKA_BOOTSTRAP")
            .ok()
            .filter(|b| !b.is_empty())
            .map(Self::Real)
    }

    pub fn bootstrap(&self) -> &str {
        match self {
            Self::Embedded(b) => b.bootstrap_servers(),
            Self::Real(bootstrap) => bootstrap,
        }
    }

    /// What the tables call it.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Embedded(_) => "embedded (mock)",
            Self::Real(_) => "Apache Kafka",
        }
    }

    pub fn embedded(&self) -> Option<&EmbeddedBroker> {
        match self {
            Self::Embedded(b) => Some(b),
            Self::Real(_) => None,
        }
    }

    /// Creates `topic` (a real broker: at its default replication).
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        match self {
            Self::Embedded(b) => b
                .create_topic(topic, partitions)
                .await
                .unwrap_or_else(|e| panic!("creating topic {topic}: {e:#}")),
            Self::Real(bootstrap) => {
                use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
                let admin: AdminClient<rdkafka::client::DefaultClientContext> =
                    rdkafka::ClientConfig::new()
                        .set("bootstrap.servers", bootstrap)
                        .create()
                        .expect("an admin client");
                let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
                let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
                for r in admin
                    .create_topics([&new], &options)
                    .await
                    .unwrap_or_else(|e| panic!("creating topic {topic}: {e}"))
                {
                    r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
                }
            }
        }
    }
}

/// A worker with the default config against `broker`, its topics created
/// with `default_partitions`.
pub fn worker_on(broker: &BenchBroker, default_partitions: i32) -> Worker {
    let config = WorkerConfig::from_map(&Default::default()).unwrap();
    Worker::new(WorkerOptions {
        id: "bench".into(),
        wasm_cache_dir: None,
        providers: Default::default(),
        file_allowed_paths: Default::default(),
        plugin_path: Vec::new(),
        transforms_library: None,
        clients: KafkaClients::new(
            &config,
            broker.bootstrap().to_string(),
            broker.embedded().cloned(),
        ),
        offsets: OffsetStore::open(None).unwrap(),
        default_partitions,
        shutdown_timeout: Duration::from_secs(5),
        metrics: Metrics::new(),
    })
    .unwrap()
}

/// Runs SQL on PostgreSQL.
pub async fn pg_exec(url: &str, sql: &str) {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
}

/// Waits (up to two minutes) until no autovacuum worker runs, so that a
/// timed run does not share the database with the vacuum of the rows an
/// earlier run wrote, then checkpoints, so that it does not pay for the
/// earlier run's dirty pages either. Says so when it gives up.
pub async fn wait_for_quiet_database(url: &str) {
    let mut c = sqlx::PgConnection::connect(url).await.unwrap();
    settle_autovacuum(&mut c).await;
    if let Err(e) = sqlx::raw_sql("CHECKPOINT").execute(&mut c).await {
        eprintln!("WARNING: CHECKPOINT before a timed run failed ({e}); timing anyway");
    }
}

async fn settle_autovacuum(c: &mut sqlx::PgConnection) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let busy: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'",
        )
        .fetch_one(&mut *c)
        .await
        .unwrap();
        if busy == 0 {
            return;
        }
        if std::time::Instant::now() > deadline {
            eprintln!(
                "WARNING: {busy} autovacuum workers still running after 2 minutes; timing anyway"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A producer for filling the benches' input topics.
pub fn order_producer(bootstrap: &str, linger_ms: &str) -> FutureProducer {
    rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", linger_ms)
        .set("batch.num.messages", "10000")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .expect("a producer")
}

/// Sends order `i` (keyed by its id) to partition `i` modulo `partitions`.
pub fn send_order(
    producer: &FutureProducer,
    topic: &str,
    partitions: i32,
    i: usize,
    value: &str,
) -> DeliveryFuture {
    let key = i.to_string();
    let record = FutureRecord::to(topic)
        .key(&key)
        .payload(value)
        .partition((i % partitions as usize) as i32);
    producer
        .send_result(record)
        .map_err(|(e, _)| e)
        .expect("the producer queue has room")
}

pub async fn await_delivery(d: DeliveryFuture) {
    d.await
        .expect("a delivery report")
        .map_err(|(e, _)| e)
        .expect("delivered");
}

/// Orders 0..`n` into `topic`, spread over its `partitions`.
pub async fn produce_orders(bootstrap: &str, topic: &str, partitions: i32, n: usize) {
    let producer = order_producer(bootstrap, "20");
    let mut pending = Vec::with_capacity(10_000);
    for i in 0..n {
        pending.push(send_order(&producer, topic, partitions, i, &order_json(i)));
        if pending.len() == 10_000 {
            for d in pending.drain(..) {
                await_delivery(d).await;
            }
        }
    }
    for d in pending {
        await_delivery(d).await;
    }
}

/// Rows in `table`; 0 if it does not exist.
pub async fn table_rows(url: &str, table: &str) -> i64 {
    let mut c = sqlx::PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    sqlx::query_scalar(&format!(
        "SELECT CASE WHEN to_regclass('{table}') IS NULL THEN 0 ELSE (SELECT COUNT(*) FROM {table}) END"
    ))
    .fetch_one(&mut c)
    .await
    .unwrap_or_else(|e| panic!("counting {table}: {e}"))
}
