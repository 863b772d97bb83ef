//! Whole pipelines, each beside a baseline measured in the same run on the
//! same broker (and database):
//!
//! 1. Kafka -> WASM transform -> PostgreSQL upsert (`jdbc-sink`), at
//!    at-least-once and exactly-once, against the simple Python pipeline
//!    (`bench/baselines/pipeline1_python.py`: one transaction and one
//!    synchronous offset commit per record), on a prefix of the records;
//! 2. Kafka -> WASM transform -> Kafka (`stream`), exactly-once, against
//!    the same loop in Python with Kafka transactions
//!    (`bench/baselines/pipeline2_python.py`) and against Sluice with no
//!    transform (what the transform costs);
//! 3. end-to-end latency at a fixed input rate for both, against the broker
//!    alone (a consumer reading the input topic);
//! 4. the worker's memory idle, and under load with many connectors;
//! 5. pipelines 1 and 2 again on a real Apache Kafka broker beside the same
//!    runs on the embedded one (part `kafka`);
//! 6. scaling: tasks, and records per run;
//! 7. the sink's latency while hundreds of clients send bad passwords to
//!    the REST API (part `authflood`), against the same worker with basic
//!    authentication and no flood;
//! 8. pipeline 1 with typed values (part `typed`): the same orders in
//!    `JsonConverter` envelopes and in Confluent's Avro, Protobuf and JSON
//!    Schema wire formats, their schemas in the worker's built-in
//!    registry, against the schemaless JSON run;
//! 9. instructions per record of the stream and the sink (part
//!    `instructions`), the worker run under callgrind.
//!
//!     bench/run.sh pipelines       (starts PostgreSQL, Apache Kafka and the Python venv)
//!
//! The bench hosts the embedded broker (librdkafka's mock cluster), and
//! part `kafka` uses the broker `SLUICE_BENCH_KAFKA_BOOTSTRAP` names; Sluice
//! runs as a child process (`sluice standalone`, REST API on a free port),
//! so its CPU time and peak memory are read from `/proc` apart from the
//! broker's and the database's. Throughput and CPU are counted from the
//! first record delivered (joining the consumer group and loading the
//! transform are not what is measured), for Sluice and Python alike.
//!
//! Environment (defaults in brackets):
//! - SLUICE_BENCH_POSTGRES_URL (required for pipeline 1 and its latency);
//! - SLUICE_BENCH_PYTHON: a python with the baselines' packages (without
//!   it the Python rows say "not run");
//! - SLUICE_BENCH_PIPELINES: which parts, comma-separated
//!   [pipeline1,pipeline2,latency,memory,kafka,scaling,authflood,typed,instructions];
//! - SLUICE_BENCH_KAFKA_BOOTSTRAP: the real broker of part `kafka`
//!   (`bench/run.sh` starts one; without it the part says "not run");
//! - SLUICE_BENCH_PIPELINE_RECORDS [1000000], SLUICE_BENCH_PY_RECORDS [20000];
//! - SLUICE_BENCH_SINK_BATCH [5000], SLUICE_BENCH_STREAM_BATCH [1000]
//!   (`batch.max.records` in parts 1, 2 and 5; the Python stream commits a
//!   transaction per stream batch too);
//! - SLUICE_BENCH_LATENCY_RATE [10000] records/s for
//!   SLUICE_BENCH_LATENCY_SECONDS [20] after SLUICE_BENCH_LATENCY_WARMUP_SECONDS [5];
//! - SLUICE_BENCH_IDLE_SECONDS [5]; SLUICE_BENCH_LOAD_CONNECTORS [10],
//!   SLUICE_BENCH_LOAD_RECORDS [100000] per connector;
//! - SLUICE_BENCH_WORKER_KEYS: a JSON object of worker keys for every
//!   worker on the bench's broker (to try settings without a rebuild);
//! - SLUICE_BENCH_FLOOD_CLIENTS [500] concurrent bad-password clients;
//! - SLUICE_BENCH_SCALING_TASKS [1,2,4];
//!   SLUICE_BENCH_SCALING_SIZES [100000,1000000,10000000];
//! - SLUICE_BENCH_COUNTED_SMALL [10000], SLUICE_BENCH_COUNTED_LARGE [40000]:
//!   the two runs under callgrind of part `instructions`;
//!   SLUICE_BENCH_CALLGRIND_DIR: keep their profiles there;
//! - SLUICE_BENCH_WORKER_WRAPPER: a command (split at spaces) that runs
//!   every worker on the bench's broker under its own pid, such as
//!   `bench/heaptrack-worker.sh` (a heap profile of each worker).

use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use sluice_runtime::kafka::EmbeddedBroker;
use sqlx::Connection;

#[path = "../../tests/fixtures/guest_build.rs"]
#[allow(dead_code)] // shared with the tests, which also build native plugins
mod guest_build;

mod common;
use common::process::{MachineCpu, ProcStats, SluiceProcess, mib, run_python_baseline};
use common::{
    BenchBroker, await_delivery, callgrind_collected, order_json, order_producer, pg_exec,
    produce_orders, send_order, table_rows,
};

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: expected a whole number")),
        Err(_) => default,
    }
}

fn env_list(name: &str, default: &str) -> Vec<String> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn env_usizes(name: &str, default: &str) -> Vec<usize> {
    env_list(name, default)
        .iter()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}: `{v}` is not a whole number"))
        })
        .collect()
}

/// Partitions for a topic of `records` orders: at least 16 (so 4 tasks all
/// get some), and enough that no partition nears the embedded broker's
/// ~5 MiB limit at ~300 bytes a record (key, transformed value, batch
/// overhead) spread evenly.
fn partitions_for(records: usize) -> i32 {
    let bytes = records as u64 * 300;
    (bytes.div_ceil(4 << 20) as i32).max(16)
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is after 1970")
        .as_micros() as i64
}

/// An order stamped with the time it was sent, for latency.
fn order_sent_at(i: usize, sent_at_us: i64) -> String {
    let json = order_json(i);
    format!("{},\"sent_at_us\":{sent_at_us}}}", &json[..json.len() - 1])
}

/// A topic the bench created, with its partition count.
#[derive(Clone)]
struct Topic {
    name: String,
    partitions: i32,
}

/// Throughput, CPU and memory of one pipeline run (Sluice or a baseline).
struct Measured {
    records: u64,
    seconds: f64,
    cpu_seconds: f64,
    peak_rss_kib: u64,
    /// The machine's CPU over the same window (none for Python's runs).
    machine: Option<MachineCpu>,
    /// Sink batches written in the window and the seconds their writes
    /// took (`sluice_sink_put_batch_seconds`; none for Python's runs).
    sink_writes: Option<(f64, f64)>,
}

impl Measured {
    fn records_per_second(&self) -> f64 {
        self.records as f64 / self.seconds
    }
    fn cpu_per_million(&self) -> f64 {
        self.cpu_seconds / self.records as f64 * 1e6
    }

    fn from_python(line: &serde_json::Value) -> Self {
        let number = |k: &str| {
            line[k]
                .as_f64()
                .unwrap_or_else(|| panic!("the Python baseline's line has no `{k}`: {line}"))
        };
        Self {
            records: number("records") as u64,
            seconds: number("seconds"),
            cpu_seconds: number("cpu_seconds"),
            peak_rss_kib: number("peak_rss_kib") as u64,
            machine: None,
            sink_writes: None,
        }
    }

    /// A table's cells: records/s, CPU s per 1M records, peak RSS MiB.
    fn cells(&self) -> String {
        format!(
            "{:.0} | {:.1} | {:.0}",
            self.records_per_second(),
            self.cpu_per_million(),
            mib(self.peak_rss_kib)
        )
    }

    /// The same three as ratios to `baseline`.
    fn ratio_cells(&self, baseline: Option<&Measured>) -> String {
        match baseline {
            Some(b) => format!(
                "{:.1}x | {:.2} | {:.2}",
                self.records_per_second() / b.records_per_second(),
                self.cpu_per_million() / b.cpu_per_million(),
                mib(self.peak_rss_kib) / mib(b.peak_rss_kib)
            ),
            None => "not run | | ".into(),
        }
    }
}

/// Where a run's records end up. Progress is followed in the worker's
/// metrics (cheap to poll: listing the end offsets of hundreds of
/// partitions every few milliseconds would load the embedded broker, which
/// the worker shares), and the end confirmed where the records are.
enum Delivered<'a> {
    /// Counted at `put` (a sink), then the table's rows.
    Table { url: &'a str, table: &'a str },
    /// Counted at `produce` (a stream), then the committed records in the
    /// output topics (read_committed end offsets).
    Topics(&'a [Topic]),
}

impl Delivered<'_> {
    fn stage(&self) -> &'static str {
        match self {
            Delivered::Table { .. } => "put",
            Delivered::Topics(_) => "produce",
        }
    }
}

/// Latency percentiles in milliseconds.
struct Latency {
    p50: f64,
    p99: f64,
    max: f64,
    records: u64,
}

struct Bench {
    broker: BenchBroker,
    bootstrap: String,
    postgres: Option<String>,
    wasm_module: PathBuf,
    wasm_cache: PathBuf,
    /// Reads end offsets of output topics.
    offsets_reader: BaseConsumer,
    /// Pre-filled order topics by record count: reused across runs.
    orders: HashMap<(usize, i32), Topic>,
    /// Stream runs (records, partitions, tasks) with the transform, at
    /// exactly-once: pipeline 2 and the scaling runs share them.
    stream_runs: HashMap<(usize, i32, usize), Rc<Measured>>,
    next_id: usize,
    stream_batch: usize,
}

impl Bench {
    fn new(broker: BenchBroker, wasm_module: PathBuf, stream_batch: usize) -> Self {
        let bootstrap = broker.bootstrap().to_string();
        let offsets_reader = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("isolation.level", "read_committed")
            .create()
            .expect("a consumer");
        Bench {
            broker,
            bootstrap,
            postgres: std::env::var("SLUICE_BENCH_POSTGRES_URL").ok(),
            wasm_module,
            wasm_cache: std::env::temp_dir().join("sluice-bench-wasm-cache"),
            offsets_reader,
            orders: HashMap::new(),
            stream_runs: HashMap::new(),
            next_id: 0,
            stream_batch,
        }
    }

    /// A fresh name: connector names are consumer group ids, and a group
    /// reused across runs would start where the last run stopped.
    fn unique(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{}", self.next_id)
    }

    async fn create_topic(&mut self, prefix: &str, partitions: i32) -> Topic {
        let name = self.unique(prefix);
        self.broker.create_topic(&name, partitions).await;
        Topic { name, partitions }
    }

    /// A topic of `partitions` holding orders 0..`n`, produced once.
    async fn orders(&mut self, n: usize, partitions: i32) -> Topic {
        if let Some(t) = self.orders.get(&(n, partitions)) {
            return t.clone();
        }
        let topic = self
            .filled_topic(&format!("orders-{n}"), n, partitions)
            .await;
        self.orders.insert((n, partitions), topic.clone());
        topic
    }

    /// A new topic of `partitions` holding orders 0..`n`, keyed by order id.
    async fn filled_topic(&mut self, prefix: &str, n: usize, partitions: i32) -> Topic {
        let topic = self.create_topic(prefix, partitions).await;
        eprintln!("producing {n} orders into {}...", topic.name);
        produce_orders(&self.bootstrap, &topic.name, partitions, n).await;
        topic
    }

    /// A worker against the bench's broker.
    async fn worker(&self) -> SluiceProcess {
        self.worker_with(serde_json::json!({})).await
    }

    /// A worker against the bench's broker, with more worker keys.
    ///
    /// The broker is librdkafka's mock, which makes a rebalance wait up to
    /// the session timeout for members to rejoin. A worker hosting it
    /// itself knows and keeps librdkafka's group defaults; this one sees a
    /// cluster and would use static membership and a 60 s session timeout,
    /// so a second task joining could stall a run for a minute. Its
    /// consumers get the embedded defaults instead (no
    /// `group.instance.id`) and a 6 s session timeout.
    /// On a real broker the worker keeps its defaults.
    async fn worker_with(&self, keys: serde_json::Value) -> SluiceProcess {
        let wrapper: Vec<String> = std::env::var("SLUICE_BENCH_WORKER_WRAPPER")
            .map(|w| w.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        SluiceProcess::start_wrapped(
            Some(&self.bootstrap),
            &self.wasm_cache,
            self.worker_keys(keys),
            &wrapper,
        )
        .await
    }

    /// The worker keys of [`Self::worker_with`].
    fn worker_keys(&self, keys: serde_json::Value) -> serde_json::Value {
        let mut all = match self.broker {
            BenchBroker::Embedded(_) => serde_json::json!({
                "consumer.group.instance.id": "",
                "consumer.session.timeout.ms": "6000",
                "consumer.heartbeat.interval.ms": "1000",
            }),
            BenchBroker::Real(_) => serde_json::json!({}),
        };
        let from_env = bench_worker_keys();
        for (k, v) in from_env
            .as_object()
            .into_iter()
            .chain(keys.as_object())
            .flatten()
        {
            all[k] = v.clone();
        }
        all
    }

    /// The reference transform's keys for a connector config.
    fn add_transform(&self, config: &mut serde_json::Value) {
        for (k, v) in [
            ("transforms", "enrich"),
            ("transforms.enrich.type", "wasm"),
            ("transforms.enrich.uppercase.field", "status"),
            ("transforms.enrich.add.field", "processed_by"),
            ("transforms.enrich.add.value", "sluice"),
        ] {
            config[k] = v.into();
        }
        config["transforms.enrich.module"] = self.wasm_module.to_string_lossy().into();
    }

    fn stream_config(
        &self,
        input: &Topic,
        output: &Topic,
        tasks: usize,
        transform: bool,
        batch: Option<usize>,
    ) -> serde_json::Value {
        let mut config = serde_json::json!({
            "connector.class": "stream",
            "topics": input.name,
            "output.topic": output.name,
            "delivery.guarantee": "exactly-once",
            "tasks.max": tasks.to_string(),
        });
        if let Some(b) = batch {
            config["batch.max.records"] = b.to_string().into();
        }
        if transform {
            self.add_transform(&mut config);
        }
        config
    }

    fn sink_config(
        &self,
        url: &str,
        input: &Topic,
        table: &str,
        guarantee: &str,
        batch: Option<usize>,
    ) -> serde_json::Value {
        let mut config = serde_json::json!({
            "connector.class": "jdbc-sink",
            "topics": input.name,
            "connection.url": url,
            "insert.mode": "upsert",
            "pk.mode": "record_value",
            "pk.fields": "order_id",
            "auto.create": "true",
            "table.name.format": table,
            "delivery.guarantee": guarantee,
        });
        if let Some(b) = batch {
            config["batch.max.records"] = b.to_string().into();
        }
        self.add_transform(&mut config);
        config
    }

    /// Records committed to `topics` so far.
    fn topic_records(&self, topics: &[Topic]) -> u64 {
        let mut ends = TopicPartitionList::new();
        for t in topics {
            for p in 0..t.partitions {
                ends.add_partition_offset(&t.name, p, Offset::End)
                    .expect("a valid partition");
            }
        }
        let ends = tokio::task::block_in_place(|| {
            self.offsets_reader
                .offsets_for_times(ends, Duration::from_secs(30))
        })
        .expect("listing end offsets");
        ends.elements()
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(o) => o.max(0) as u64,
                _ => 0,
            })
            .sum()
    }

    /// Records that reached their destination (committed rows or records).
    async fn arrived(&self, to: &Delivered<'_>) -> u64 {
        match to {
            Delivered::Table { url, table } => table_rows(url, table).await as u64,
            Delivered::Topics(topics) => self.topic_records(topics),
        }
    }

    /// Starts a worker, creates `connectors` in it, and measures from the
    /// first record delivered until `n` are.
    async fn run_sluice(
        &mut self,
        connectors: Vec<serde_json::Value>,
        n: usize,
        to: Delivered<'_>,
    ) -> Measured {
        self.run_sluice_with(connectors, n, to, serde_json::json!({}))
            .await
    }

    /// [`Self::run_sluice`] on a worker with more worker keys.
    async fn run_sluice_with(
        &mut self,
        connectors: Vec<serde_json::Value>,
        n: usize,
        to: Delivered<'_>,
        worker_keys: serde_json::Value,
    ) -> Measured {
        let named = connectors
            .into_iter()
            .map(|config| (self.unique("bench"), config))
            .collect();
        self.run_named_with(named, n, to, worker_keys).await
    }

    /// [`Self::run_sluice`] with the connectors' names given.
    async fn run_named(
        &mut self,
        connectors: Vec<(String, serde_json::Value)>,
        n: usize,
        to: Delivered<'_>,
    ) -> Measured {
        self.run_named_with(connectors, n, to, serde_json::json!({}))
            .await
    }

    async fn run_named_with(
        &mut self,
        connectors: Vec<(String, serde_json::Value)>,
        n: usize,
        to: Delivered<'_>,
        worker_keys: serde_json::Value,
    ) -> Measured {
        let worker = self.worker_with(worker_keys).await;
        let mut names = Vec::new();
        for (name, config) in connectors {
            worker
                .create_connector(&serde_json::json!({"name": name, "config": config}))
                .await;
            names.push(name);
        }
        let deadline = Instant::now() + Duration::from_secs(600 + n as u64 / 1000);
        let mut first: Option<(Instant, u64, ProcStats, MachineCpu)> = None;
        let mut writes_before = (0.0, 0.0);
        loop {
            let done = worker.records_ok(to.stage()).await;
            if done > 0 && first.is_none() {
                first = Some((Instant::now(), done, worker.stats(), MachineCpu::now()));
                writes_before = worker.sink_writes().await;
            }
            if done >= n as u64 {
                break;
            }
            if Instant::now() > deadline {
                panic!("{names:?}: {done} of {n} records delivered before the deadline");
            }
            for name in &names {
                worker.assert_running(name).await;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The last batch is counted as it is written, and there once committed.
        while self.arrived(&to).await < n as u64 {
            assert!(
                Instant::now() < deadline,
                "{names:?}: records counted but missing at their destination"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let end = worker.stats();
        let machine_end = MachineCpu::now();
        let writes_after = worker.sink_writes().await;
        let (started, counted, start, machine_start) = first.expect("a first record");
        Measured {
            records: n as u64 - counted,
            seconds: started.elapsed().as_secs_f64(),
            cpu_seconds: end.cpu_seconds - start.cpu_seconds,
            peak_rss_kib: end.peak_rss_kib,
            machine: Some(machine_start.since(&machine_end)),
            sink_writes: Some((
                writes_after.0 - writes_before.0,
                writes_after.1 - writes_before.1,
            )),
        }
    }

    /// Pipeline 2 with the transform, one task, over `n` orders fed into a
    /// topic of `partitions` while it runs (see [`feed`]).
    async fn stream_fed(&mut self, n: usize, partitions: i32) -> Measured {
        let input = self.create_topic(&format!("fed-{n}"), partitions).await;
        let output = self.create_topic("stream-out", partitions).await;
        eprintln!(
            "Sluice stream, exactly-once, WASM transform, {n} records fed as it runs, {partitions} partitions, 1 task..."
        );
        let config = self.stream_config(&input, &output, 1, true, Some(self.stream_batch));
        let name = self.unique("bench");
        let feeder = tokio::spawn(feed(
            self.bootstrap.clone(),
            input,
            format!("connect-{name}"),
            n,
        ));
        let m = self
            .run_named(vec![(name, config)], n, Delivered::Topics(&[output]))
            .await;
        feeder.await.expect("the feeder finished");
        m
    }

    /// Pipeline 2 with the transform over `n` orders in a topic of
    /// `partitions`, in `tasks` tasks (each measured once per bench run).
    async fn stream_with_transform(
        &mut self,
        n: usize,
        partitions: i32,
        tasks: usize,
    ) -> Rc<Measured> {
        if let Some(m) = self.stream_runs.get(&(n, partitions, tasks)) {
            return m.clone();
        }
        let input = self.orders(n, partitions).await;
        let output = self.create_topic("stream-out", input.partitions).await;
        eprintln!(
            "Sluice stream, exactly-once, WASM transform, {n} records, {partitions} partitions, {tasks} tasks..."
        );
        let config = self.stream_config(&input, &output, tasks, true, Some(self.stream_batch));
        let m = Rc::new(
            self.run_sluice(vec![config], n, Delivered::Topics(&[output]))
                .await,
        );
        self.stream_runs.insert((n, partitions, tasks), m.clone());
        m
    }
}

impl Bench {
    /// The instructions a worker under callgrind executes, from its start
    /// to its clean exit, to deliver `n` records through `config`.
    async fn worker_instructions(
        &mut self,
        config: serde_json::Value,
        n: usize,
        to: Delivered<'_>,
    ) -> Result<u64, String> {
        // The profile itself is kept only when asked for (to read with
        // callgrind_annotate); the count is in the log either way.
        let out_file = match std::env::var("SLUICE_BENCH_CALLGRIND_DIR") {
            Ok(dir) => format!("{dir}/callgrind.{}.%p.out", self.next_id + 1),
            Err(_) => "/dev/null".into(),
        };
        let wrapper = vec![
            "valgrind".to_string(),
            "--tool=callgrind".into(),
            format!("--callgrind-out-file={out_file}"),
        ];
        let worker = SluiceProcess::start_wrapped(
            Some(&self.bootstrap),
            &self.wasm_cache,
            self.worker_keys(serde_json::json!({})),
            &wrapper,
        )
        .await;
        let name = self.unique("counted");
        worker
            .create_connector(&serde_json::json!({"name": name, "config": config}))
            .await;
        let deadline = Instant::now() + Duration::from_secs(3600);
        while worker.records_ok(to.stage()).await < n as u64 || self.arrived(&to).await < n as u64 {
            assert!(
                Instant::now() < deadline,
                "{name} under callgrind: {n} records not delivered within an hour"
            );
            worker.assert_running(&name).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        callgrind_collected(&worker.terminate())
    }

    /// Instructions per record of a pipeline: the difference between a
    /// worker's whole-run counts over `small` and `large` records, divided
    /// by the difference in records, so starting, loading the transform
    /// and shutting down cancel out. `make` builds the connector config
    /// from an input topic and an empty output topic (for a stream), and
    /// says where its records land.
    async fn instructions_per_record(
        &mut self,
        small: usize,
        large: usize,
        make: &mut dyn FnMut(&mut Bench, &Topic, Topic) -> (serde_json::Value, Destination),
    ) -> Result<Counted, String> {
        let partitions = partitions_for(large);
        let mut counts = Vec::new();
        for n in [small, large] {
            let input = self.orders(n, partitions).await;
            let output = self.create_topic("counted-out", partitions).await;
            let (config, destination) = make(self, &input, output);
            let destination = match &destination {
                Destination::Table { url, table } => {
                    // Offsets an earlier run stored would point past this
                    // run's input (topic names repeat between bench runs).
                    pg_exec(url, "DELETE FROM sluice_offsets").await;
                    Delivered::Table { url, table }
                }
                Destination::Topic(t) => Delivered::Topics(std::slice::from_ref(t)),
            };
            eprintln!("under callgrind: {n} records...");
            counts.push(self.worker_instructions(config, n, destination).await?);
        }
        Ok(Counted {
            per_record: (counts[1] as f64 - counts[0] as f64) / (large - small) as f64,
            whole_runs: [counts[0], counts[1]],
        })
    }
}

/// A pipeline's instructions per record, and the two whole-run counts it
/// is the difference of.
struct Counted {
    per_record: f64,
    whole_runs: [u64; 2],
}

/// Where a counted run's records land (owned, for [`Delivered`]).
enum Destination {
    Table { url: String, table: String },
    Topic(Topic),
}

/// Part `instructions`: instructions per record of the stream and the sink,
/// counted by callgrind over the whole worker process (the broker and the
/// database are other processes, not counted).
async fn instructions(bench: &mut Bench, small: usize, large: usize, sink_batch: usize) {
    println!("\n### Instructions per record\n");
    println!(
        "`valgrind --tool=callgrind` over the whole `sluice standalone` process, embedded broker (in the bench's process, not counted); per record = (count over {large} records - count over {small}) / {}, so start-up and shutdown cancel out. Stable on a busy machine where seconds are not; batches may close at other sizes under callgrind's slowdown than at full speed.\n",
        large - small
    );
    // The first worker to load the transform compiles it; the counted
    // workers should all load it from the cache, or the first run's count
    // would hold a compilation the second's does not.
    let stream_batch = bench.stream_batch;
    let warm_input = bench.orders(1000, 1).await;
    let warm_output = bench.create_topic("warm-out", 1).await;
    let warm = bench.stream_config(&warm_input, &warm_output, 1, true, Some(stream_batch));
    bench
        .run_sluice(vec![warm], 1000, Delivered::Topics(&[warm_output]))
        .await;
    println!(
        "| pipeline | instructions per record | whole run, {small} records | whole run, {large} records |"
    );
    println!("|---|---:|---:|---:|");
    let mut rows: Vec<(String, Result<Counted, String>)> = Vec::new();
    for transform in [true, false] {
        let label = format!(
            "stream, exactly-once, {}, `batch.max.records` {stream_batch}",
            if transform {
                "WASM reference transform"
            } else {
                "no transform"
            }
        );
        let result = bench
            .instructions_per_record(small, large, &mut |bench, input, output| {
                let config = bench.stream_config(input, &output, 1, transform, Some(stream_batch));
                (config, Destination::Topic(output))
            })
            .await;
        rows.push((label, result));
    }
    match bench.postgres.clone() {
        Some(url) => {
            pg_exec(
                &url,
                &sluice_connector_jdbc::Dialect::Postgres.create_offsets_table("sluice_offsets"),
            )
            .await;
            for guarantee in ["at-least-once", "exactly-once"] {
                let result = bench
                    .instructions_per_record(small, large, &mut |bench, input, _| {
                        let table = bench.unique("counted").replace('-', "_");
                        let config =
                            bench.sink_config(&url, input, &table, guarantee, Some(sink_batch));
                        (
                            config,
                            Destination::Table {
                                url: url.clone(),
                                table,
                            },
                        )
                    })
                    .await;
                rows.push((
                    format!("jdbc-sink upsert, {guarantee}, WASM reference transform, `batch.max.records` {sink_batch}"),
                    result,
                ));
            }
        }
        None => rows.push((
            "jdbc-sink".into(),
            Err("NOT RUN: set SLUICE_BENCH_POSTGRES_URL".into()),
        )),
    }
    for (label, result) in rows {
        match result {
            Ok(Counted {
                per_record,
                whole_runs: [at_small, at_large],
            }) => println!("| {label} | {per_record:.0} | {at_small} | {at_large} |"),
            Err(e) => println!(
                "| {label} | NOT COUNTED: {} | | |",
                e.lines().next().unwrap_or("")
            ),
        }
    }
}

/// How far a fed input may run ahead of its pipeline in any partition:
/// about 2 MiB of orders, well within what the embedded broker keeps.
const FED_RECORDS_PER_PARTITION: i64 = 8_000;

/// Produces orders 0..`n` into `input` while a pipeline whose consumer
/// group is `group` reads it, never more than [`FED_RECORDS_PER_PARTITION`]
/// records ahead of the group's committed offset in any partition. The
/// embedded broker keeps ~5 MiB per partition and drops the oldest records
/// beyond that, so a run larger than a topic can hold is fed as it goes
/// (per partition: a consumer may read some partitions well ahead of
/// others).
async fn feed(bootstrap: String, input: Topic, group: String, n: usize) {
    let reader: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", &group)
        .create()
        .expect("a consumer");
    let mut partitions = TopicPartitionList::new();
    for p in 0..input.partitions {
        partitions.add_partition(&input.name, p);
    }
    let slowest_committed = || -> i64 {
        tokio::task::block_in_place(|| {
            reader.committed_offsets(partitions.clone(), Duration::from_secs(30))
        })
        .expect("reading the group's committed offsets")
        .elements()
        .iter()
        .map(|e| match e.offset() {
            Offset::Offset(o) => o,
            _ => 0,
        })
        .min()
        .unwrap_or(0)
    };
    let producer = order_producer(&bootstrap, "20");
    let mut pending = Vec::with_capacity(10_000);
    for i in 0..n {
        pending.push(send_order(
            &producer,
            &input.name,
            input.partitions,
            i,
            &order_json(i),
        ));
        if pending.len() == 10_000 || i + 1 == n {
            for d in pending.drain(..) {
                await_delivery(d).await;
            }
            // Orders go round-robin: each partition holds about this many.
            let per_partition = ((i + 1) / input.partitions as usize) as i64;
            while per_partition - slowest_committed() > FED_RECORDS_PER_PARTITION {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// A table of Sluice runs beside a Python baseline, with ratios to it.
fn print_against_python(
    rows: &[(String, &Measured)],
    python: Option<&Measured>,
    python_label: &str,
) {
    println!(
        "| pipeline | records/s | CPU s per 1M records | peak RSS MiB | records/s vs Python | CPU/record vs Python | peak RSS vs Python |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (label, m) in rows {
        println!("| {label} | {} | {} |", m.cells(), m.ratio_cells(python));
    }
    match python {
        Some(p) => println!("| {python_label} | {} | 1.0x | 1.00 | 1.00 |", p.cells()),
        None => println!(
            "| Python baseline | NOT RUN: set SLUICE_BENCH_PYTHON (bench/run.sh does) | | | | | |"
        ),
    }
}

/// Pipeline 1 and its Python baseline; returns the Python rate (for the
/// latency section's note).
async fn pipeline1(bench: &mut Bench, n: usize, py_n: usize, batch: usize) -> Option<f64> {
    let url = bench
        .postgres
        .clone()
        .expect("SLUICE_BENCH_POSTGRES_URL: run through bench/run.sh, which starts PostgreSQL");
    let input = bench.orders(n, partitions_for(n)).await;
    pg_exec(
        &url,
        &sluice_connector_jdbc::Dialect::Postgres.create_offsets_table("sluice_offsets"),
    )
    .await;
    let mut runs = Vec::new();
    for guarantee in ["at-least-once", "exactly-once"] {
        let table = bench.unique("pipeline1").replace('-', "_");
        // Offsets an earlier run stored would point past this run's input.
        pg_exec(
            &url,
            &format!("DROP TABLE IF EXISTS {table}; DELETE FROM sluice_offsets"),
        )
        .await;
        common::wait_for_quiet_database(&url).await;
        eprintln!("pipeline 1: Sluice jdbc-sink, {guarantee}, {n} records...");
        let config = bench.sink_config(&url, &input, &table, guarantee, Some(batch));
        let m = bench
            .run_sluice(
                vec![config],
                n,
                Delivered::Table {
                    url: &url,
                    table: &table,
                },
            )
            .await;
        runs.push((guarantee, m));
    }
    eprintln!("pipeline 1: Python over {py_n} records...");
    let python = run_python_baseline(
        "pipeline1_python.py",
        &[
            "--bootstrap".into(),
            bench.bootstrap.clone(),
            "--topic".into(),
            input.name.clone(),
            "--url".into(),
            url.replacen("postgres://", "postgresql+psycopg2://", 1),
            "--records".into(),
            py_n.to_string(),
        ],
    )
    .map(|line| Measured::from_python(&line));

    println!("\n### Pipeline 1: Kafka -> WASM transform -> PostgreSQL upsert\n");
    println!(
        "{n} JSON order records (Python: the first {py_n} it reads), embedded broker ({} partitions), one task, `batch.max.records` {batch}; ratios are Sluice / Python\n",
        input.partitions
    );
    let rows: Vec<(String, &Measured)> = runs
        .iter()
        .map(|(guarantee, m)| (format!("Sluice jdbc-sink, {guarantee}"), m))
        .collect();
    print_against_python(
        &rows,
        python.as_ref(),
        &format!(
            "Python: confluent-kafka + SQLAlchemy, 1 tx and 1 sync commit per record ({py_n} records; baseline)"
        ),
    );
    print_cpu_split(&rows);
    // The sink task's write of each batch (put and commit): how much of
    // the run it took; the rest, the write waited for the next batch.
    for (label, m) in &rows {
        if let Some((batches, seconds)) = m.sink_writes {
            println!(
                "{label}: {batches:.0} batches written, {:.1} ms each, writing {:.2} of the run",
                1000.0 * seconds / batches.max(1.0),
                seconds / m.seconds
            );
        }
    }
    let (alo, eos) = (&runs[0].1, &runs[1].1);
    println!(
        "\nexactly-once / at-least-once throughput: {:.2}",
        eos.records_per_second() / alo.records_per_second()
    );
    if let Some(p) = &python {
        println!(
            "target (at least 20x the Python pipeline at the same guarantee): {}",
            if alo.records_per_second() >= 20.0 * p.records_per_second() {
                "met"
            } else {
                "NOT met"
            }
        );
    }
    python.map(|p| p.records_per_second())
}

/// Where the machine's cores went during each run: the worker, the bench
/// (with the embedded broker in it), PostgreSQL and a JVM broker, and the
/// rate the run would reach with every core busy at the same CPU per record:
/// the ceiling of this machine, measured rather than estimated.
fn print_cpu_split(rows: &[(String, &Measured)]) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!(
        "\nWhere the CPU went (cores busy on average over the run; this machine has {cores}):\n"
    );
    println!(
        "| run | records/s | machine busy | worker | bench process (embedded broker) | PostgreSQL | Apache Kafka (JVM) | other | machine CPU s per 1M | records/s with all {cores} cores busy |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (label, m) in rows {
        let Some(cpu) = m.machine else { continue };
        let per_second = |v: f64| v / m.seconds;
        let other = cpu.busy - m.cpu_seconds - cpu.bench - cpu.postgres - cpu.java;
        println!(
            "| {label} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} | {:.0} |",
            m.records_per_second(),
            per_second(cpu.busy),
            per_second(m.cpu_seconds),
            per_second(cpu.bench),
            per_second(cpu.postgres),
            per_second(cpu.java),
            per_second(other),
            cpu.busy / m.records as f64 * 1e6,
            m.records as f64 / cpu.busy * cores
        );
    }
}

/// The converters of part `typed`: a row's label, the class (`None`: the
/// schemaless JSON baseline) and the Confluent format, if a registry one.
const TYPED: [(&str, Option<&str>); 5] = [
    ("JsonConverter, schemaless (baseline)", None),
    (
        "JsonConverter, schemas.enable",
        Some("org.apache.kafka.connect.json.JsonConverter"),
    ),
    (
        "AvroConverter",
        Some("io.confluent.connect.avro.AvroConverter"),
    ),
    (
        "ProtobufConverter",
        Some("io.confluent.connect.protobuf.ProtobufConverter"),
    ),
    (
        "JsonSchemaConverter",
        Some("io.confluent.connect.json.JsonSchemaConverter"),
    ),
];

/// The typed order: a decimal and a timestamp among plain fields.
fn typed_order_schema() -> std::sync::Arc<sluice_sdk::Schema> {
    use sluice_sdk::Schema;
    std::sync::Arc::new(
        Schema::structure([
            ("order_id", Schema::int64()),
            ("customer_id", Schema::string()),
            ("amount", Schema::decimal(2)),
            ("currency", Schema::string()),
            ("status", Schema::string().optional()),
            ("updated_at", Schema::timestamp()),
        ])
        .named("shop.Order"),
    )
}

/// Order `i` in a sink's form of [`typed_order_schema`]: the values of
/// [`order_json`], the time as a timestamp.
fn typed_order(i: usize) -> Vec<u8> {
    format!(
        r#"{{"order_id":{i},"customer_id":"cust-{:05}","amount":{}.{:02},"currency":"EUR","status":"shipped","updated_at":{}}}"#,
        i % 1000,
        10 + i % 500,
        i % 100,
        1_767_225_600_000u64 + (i % 60) as u64 * 1000
    )
    .into_bytes()
}

/// The converter that writes a typed topic for `class`, against the
/// registry at `registry_url` (a worker's `/schema-registry`).
fn typed_writer(class: &str, registry_url: &str) -> sluice_runtime::schema::SchemaConverter {
    use sluice_runtime::config::{DecimalFormat, JsonSchemas, RegistryFormat, RegistrySettings};
    use sluice_runtime::schema::registry::client::{ClientConfig, HttpRegistry};
    use sluice_runtime::schema::{
        EnvelopeConverter, SchemaConverter, avro_converter, json_schema_converter,
        protobuf_converter,
    };
    let format = match class {
        "org.apache.kafka.connect.json.JsonConverter" => {
            return SchemaConverter::Json(EnvelopeConverter::new(JsonSchemas {
                decimal_format: DecimalFormat::Base64,
                replace_null_with_default: true,
                cache_size: 1000,
            }));
        }
        "io.confluent.connect.avro.AvroConverter" => RegistryFormat::Avro,
        "io.confluent.connect.protobuf.ProtobufConverter" => RegistryFormat::Protobuf,
        _ => RegistryFormat::JsonSchema,
    };
    let registry = std::sync::Arc::new(
        HttpRegistry::new(ClientConfig {
            urls: vec![registry_url.to_string()],
            basic_auth: None,
            truststore: None,
            keystore: None,
        })
        .expect("a registry client"),
    );
    let settings = RegistrySettings {
        registry_urls: vec![registry_url.to_string()],
        ..RegistrySettings::defaults(format)
    };
    match format {
        RegistryFormat::Avro => SchemaConverter::Avro(avro_converter::AvroConverter::new(
            registry, settings, false,
        )),
        RegistryFormat::Protobuf => SchemaConverter::Protobuf(
            protobuf_converter::ProtobufConverter::new(registry, settings, false),
        ),
        RegistryFormat::JsonSchema => SchemaConverter::JsonSchema(
            json_schema_converter::JsonSchemaConverter::new(registry, settings, false),
        ),
    }
}

/// Part `typed`: pipeline 1 at exactly-once over `n` orders in each of
/// [`TYPED`]'s formats, in one run; the typed topics are written by the
/// converters themselves, registering their schemas with a worker's
/// built-in registry (kept in `_sluice_schemas` on the bench's broker, so
/// the measured workers read the same ids).
async fn typed(bench: &mut Bench, n: usize, batch: usize) {
    let url = bench
        .postgres
        .clone()
        .expect("SLUICE_BENCH_POSTGRES_URL: run through bench/run.sh, which starts PostgreSQL");
    pg_exec(
        &url,
        &sluice_connector_jdbc::Dialect::Postgres.create_offsets_table("sluice_offsets"),
    )
    .await;
    if let BenchBroker::Embedded(_) = bench.broker {
        // The embedded broker creates no topic on request.
        bench.broker.create_topic("_sluice_schemas", 1).await;
    }
    let schema = typed_order_schema();
    let mut inputs = Vec::new();
    {
        let registry_worker = bench.worker().await;
        let registry_url = format!("{}/schema-registry", registry_worker.rest());
        for (label, class) in TYPED {
            let Some(class) = class else {
                inputs.push(bench.orders(n, partitions_for(n)).await);
                continue;
            };
            let writer = typed_writer(class, &registry_url);
            // Sized by the format's records: an envelope carries its schema.
            let prefix = format!("typed-{}", label.split(',').next().unwrap_or(label));
            let probe_topic = format!("{prefix}-probe");
            let one = writer
                .write_bytes(&probe_topic, Some(&schema), Some(&typed_order(0)))
                .await
                .expect("a typed order")
                .expect("a value");
            let partitions =
                ((n as u64 * (one.len() as u64 + 150)).div_ceil(4 << 20) as i32).max(16);
            let topic = bench
                .create_topic(&prefix.to_ascii_lowercase(), partitions)
                .await;
            eprintln!(
                "typed: producing {n} orders with {label} ({} bytes each) into {}...",
                one.len(),
                topic.name
            );
            let producer = order_producer(&bench.bootstrap, "20");
            let mut pending = Vec::with_capacity(10_000);
            for i in 0..n {
                let value = writer
                    .write_bytes(&topic.name, Some(&schema), Some(&typed_order(i)))
                    .await
                    .expect("a typed order")
                    .expect("a value");
                let key = i.to_string();
                let record = rdkafka::producer::FutureRecord::to(&topic.name)
                    .key(&key)
                    .payload(&value)
                    .partition((i % partitions as usize) as i32);
                pending.push(
                    producer
                        .send_result(record)
                        .map_err(|(e, _)| e)
                        .expect("the producer queue has room"),
                );
                if pending.len() == 10_000 {
                    for d in pending.drain(..) {
                        await_delivery(d).await;
                    }
                }
            }
            for d in pending {
                await_delivery(d).await;
            }
            inputs.push(topic);
        }
    }
    let mut runs = Vec::new();
    for ((label, class), input) in TYPED.iter().zip(&inputs) {
        let table = bench.unique("typed").replace('-', "_");
        pg_exec(
            &url,
            &format!("DROP TABLE IF EXISTS {table}; DELETE FROM sluice_offsets"),
        )
        .await;
        eprintln!("typed: pipeline 1, exactly-once, {label}, {n} records...");
        let mut config = bench.sink_config(&url, input, &table, "exactly-once", Some(batch));
        if let Some(class) = class {
            config["value.converter"] = (*class).into();
            if class.ends_with("JsonConverter") {
                config["value.converter.schemas.enable"] = "true".into();
            }
        }
        let m = bench
            .run_sluice(
                vec![config],
                n,
                Delivered::Table {
                    url: &url,
                    table: &table,
                },
            )
            .await;
        pg_exec(&url, &format!("DROP TABLE IF EXISTS {table}")).await;
        runs.push((label, m));
    }
    println!("\n### Pipeline 1 with typed values\n");
    println!(
        "{n} order records per format, embedded broker, one task, exactly-once, `batch.max.records` {batch}, the reference WASM transform; typed orders carry a `Decimal` amount and a `Timestamp` (the sink creates NUMERIC and TIMESTAMPTZ columns), their schemas in the worker's built-in registry; ratios to the schemaless JSON run\n"
    );
    println!(
        "| value converter | records/s | CPU s per 1M records | peak RSS MiB | records/s vs schemaless | CPU/record vs schemaless | peak RSS vs schemaless |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let baseline = &runs[0].1;
    for (label, m) in &runs {
        println!(
            "| {label} | {} | {} |",
            m.cells(),
            m.ratio_cells(Some(baseline))
        );
    }
}

/// Pipeline 2 and its baselines; returns the Python rate.
async fn pipeline2(bench: &mut Bench, n: usize, py_n: usize) -> Option<f64> {
    let with_transform = bench.stream_with_transform(n, partitions_for(n), 1).await;
    let input = bench.orders(n, partitions_for(n)).await;
    let output = bench
        .create_topic("passthrough-out", input.partitions)
        .await;
    eprintln!("pipeline 2: Sluice stream, exactly-once, no transform, {n} records...");
    let config = bench.stream_config(&input, &output, 1, false, Some(bench.stream_batch));
    let passthrough = bench
        .run_sluice(vec![config], n, Delivered::Topics(&[output]))
        .await;
    let py_output = bench.create_topic("py-stream-out", input.partitions).await;
    eprintln!("pipeline 2: Python over {py_n} records...");
    let python = run_python_baseline(
        "pipeline2_python.py",
        &[
            "--bootstrap".into(),
            bench.bootstrap.clone(),
            "--topic".into(),
            input.name.clone(),
            "--output-topic".into(),
            py_output.name.clone(),
            "--records".into(),
            py_n.to_string(),
            "--batch".into(),
            bench.stream_batch.to_string(),
        ],
    )
    .map(|line| Measured::from_python(&line));

    println!("\n### Pipeline 2: Kafka -> WASM transform -> Kafka, exactly-once\n");
    println!(
        "{n} JSON order records (Python: the first {py_n} it reads), embedded broker ({} partitions), one task, a transaction per {} records; ratios are to the Python loop\n",
        input.partitions, bench.stream_batch
    );
    print_against_python(
        &[
            ("Sluice stream, WASM transform".into(), &with_transform),
            (
                "Sluice stream, no transform (pass-through)".into(),
                &passthrough,
            ),
        ],
        python.as_ref(),
        &format!(
            "Python: confluent-kafka consume-transform-produce with transactions ({py_n} records; baseline)"
        ),
    );
    println!(
        "\nthe transform's cost: throughput {:.2} of the pass-through's, {:.1} CPU s per 1M records more",
        with_transform.records_per_second() / passthrough.records_per_second(),
        with_transform.cpu_per_million() - passthrough.cpu_per_million()
    );
    python.map(|p| p.records_per_second())
}

/// What a latency run sends: the rate, and which records count.
struct Pace {
    rate: usize,
    warmup: Duration,
    measured: Duration,
}

impl Pace {
    fn total(&self) -> usize {
        (self.rate as f64 * (self.warmup + self.measured).as_secs_f64()) as usize
    }
    /// The order ids sent after the warm-up: those measured.
    fn measured_ids(&self) -> std::ops::Range<usize> {
        (self.rate as f64 * self.warmup.as_secs_f64()) as usize..self.total()
    }
}

/// Produces orders 0..`pace.total()` at the rate, each stamped with its
/// send time.
async fn produce_paced(bootstrap: &str, topic: &Topic, pace: &Pace) {
    // librdkafka's default linger.ms: the producer batches what 5 ms bring.
    let producer = order_producer(bootstrap, "5");
    let started = Instant::now();
    let mut pending = Vec::with_capacity(pace.total());
    for i in 0..pace.total() {
        let due = started + Duration::from_secs_f64(i as f64 / pace.rate as f64);
        if due > Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
        pending.push(send_order(
            &producer,
            &topic.name,
            topic.partitions,
            i,
            &order_sent_at(i, now_us()),
        ));
    }
    for d in pending {
        await_delivery(d).await;
    }
}

/// How long a consumer's fetch may wait on the broker for records. The
/// embedded broker (librdkafka's mock) holds every fetch this long, even
/// when records arrive meanwhile (a real broker answers once
/// `fetch.min.bytes` are there), so librdkafka's default, 500 ms, would put
/// about 250 ms into every hop. The bench's consumers and, in the latency
/// runs, the worker's use this instead.
const FAST_FETCH_WAIT_MS: &str = "5";

/// Reads `topic` (read_committed) from the start until `expected` records
/// came, in a thread of its own; returns each record's order id, and its
/// send and receive times in µs. `fetch_wait_ms`: None for librdkafka's
/// default.
fn receive_times(
    bootstrap: &str,
    topic: &Topic,
    expected: usize,
    fetch_wait_ms: Option<&str>,
    deadline: Instant,
) -> std::thread::JoinHandle<Vec<(usize, i64, i64)>> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "bench-latency")
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false");
    if let Some(ms) = fetch_wait_ms {
        config.set("fetch.wait.max.ms", ms);
    }
    let consumer: BaseConsumer = config.create().expect("a consumer");
    let mut all = TopicPartitionList::new();
    for p in 0..topic.partitions {
        all.add_partition_offset(&topic.name, p, Offset::Beginning)
            .expect("a valid partition");
    }
    consumer.assign(&all).expect("assigning partitions");
    std::thread::spawn(move || {
        use rdkafka::Message;
        let mut times = Vec::with_capacity(expected);
        while times.len() < expected && Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    let received = now_us();
                    let order: serde_json::Value = m
                        .payload()
                        .and_then(|v| serde_json::from_slice(v).ok())
                        .expect("a JSON order");
                    match (order["order_id"].as_u64(), order["sent_at_us"].as_i64()) {
                        (Some(id), Some(sent)) => times.push((id as usize, sent, received)),
                        _ => panic!("an order without order_id or sent_at_us: {order}"),
                    }
                }
                Some(Err(e)) => panic!("consuming for latency: {e}"),
                None => {}
            }
        }
        times
    })
}

fn percentiles(mut latencies_us: Vec<i64>) -> Latency {
    assert!(!latencies_us.is_empty(), "no latency measured");
    latencies_us.sort_unstable();
    let at = |q: f64| {
        latencies_us[((latencies_us.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0
    };
    Latency {
        p50: at(0.5),
        p99: at(0.99),
        max: at(1.0),
        records: latencies_us.len() as u64,
    }
}

/// Latency from `input` to `output` (the same topic for the broker alone)
/// while `input` gets records at the pace; `expected` counts any probe
/// record `output` also holds.
async fn topic_latency(
    bench: &Bench,
    (input, output): (&Topic, &Topic),
    pace: &Pace,
    expected: usize,
    fetch_wait_ms: Option<&str>,
) -> Latency {
    let deadline = Instant::now() + pace.warmup + pace.measured + Duration::from_secs(120);
    let receiver = receive_times(&bench.bootstrap, output, expected, fetch_wait_ms, deadline);
    produce_paced(&bench.bootstrap, input, pace).await;
    let times = tokio::task::spawn_blocking(move || receiver.join())
        .await
        .expect("joined")
        .expect("the latency consumer did not panic");
    let measured = pace.measured_ids();
    percentiles(
        times
            .into_iter()
            .filter(|(id, _, _)| measured.contains(id))
            .map(|(_, sent, received)| received - sent)
            .collect(),
    )
}

/// Sends the probe record (order id past the paced ones, so it is never
/// measured): a pipeline is ready once it went through.
async fn send_probe(bootstrap: &str, topic: &Topic, pace: &Pace) {
    let probe = order_producer(bootstrap, "0");
    let id = pace.total();
    await_delivery(send_order(
        &probe,
        &topic.name,
        topic.partitions,
        id,
        &order_sent_at(id, now_us()),
    ))
    .await;
}

/// Partitions of the latency runs' topics. Few, so that each partition's
/// record batches are large: the embedded broker finds a fetch's offset by
/// walking the partition's batches from the oldest, so thousands of tiny
/// batches slow every fetch down as a run goes on (it keeps ~5 MiB per
/// partition, dropping the oldest, which bounds the walk; a paced consumer
/// stays far within that).
const LATENCY_PARTITIONS: i32 = 4;

/// Part 3: end-to-end latency at a fixed input rate.
async fn latency(bench: &mut Bench, pace: &Pace, python_rates: &[(&str, Option<f64>)]) {
    let partitions = LATENCY_PARTITIONS;
    let mut rows: Vec<(String, Latency)> = Vec::new();

    for (label, fetch_wait) in [
        (
            format!(
                "the broker alone: a consumer reading the input topic, `fetch.wait.max.ms` {FAST_FETCH_WAIT_MS} (baseline)"
            ),
            Some(FAST_FETCH_WAIT_MS),
        ),
        (
            "the broker alone, librdkafka's default `fetch.wait.max.ms` (500)".into(),
            None,
        ),
    ] {
        eprintln!("latency: {label}...");
        let input = bench.create_topic("latency-broker", partitions).await;
        rows.push((
            label,
            topic_latency(bench, (&input, &input), pace, pace.total(), fetch_wait).await,
        ));
    }

    // Each Sluice row twice: with the defaults (a batch closes when the
    // consumer has no more records at hand) and with `batch.linger.ms`
    // 100, which is how batches closed before (each waited out its
    // `batch.max.ms`): the same run shows what the change is worth.
    for (linger, suffix) in [
        (None, ""),
        (
            Some("100"),
            ", `batch.linger.ms=100` (a batch waits out `batch.max.ms`, as before 2026-12-03)",
        ),
    ] {
        eprintln!("latency: Sluice stream, exactly-once, WASM transform{suffix}...");
        let input = bench.create_topic("latency-stream-in", partitions).await;
        let output = bench.create_topic("latency-stream-out", partitions).await;
        let worker = bench.worker_with(fast_fetch()).await;
        let name = bench.unique("latency-stream");
        let mut config = bench.stream_config(&input, &output, 1, true, None);
        if let Some(ms) = linger {
            config["batch.linger.ms"] = ms.into();
        }
        worker
            .create_connector(&serde_json::json!({"name": name, "config": config}))
            .await;
        send_probe(&bench.bootstrap, &input, pace).await;
        while bench.topic_records(std::slice::from_ref(&output)) == 0 {
            worker.assert_running(&name).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        rows.push((
            format!("Sluice stream, exactly-once, WASM transform{suffix}"),
            topic_latency(
                bench,
                (&input, &output),
                pace,
                pace.total() + 1,
                Some(FAST_FETCH_WAIT_MS),
            )
            .await,
        ));
        drop(worker);

        if let Some(url) = bench.postgres.clone() {
            for guarantee in ["at-least-once", "exactly-once"] {
                eprintln!("latency: Sluice jdbc-sink, {guarantee}{suffix}...");
                rows.push((
                    format!("Sluice jdbc-sink, {guarantee}, WASM transform{suffix}"),
                    sink_latency(bench, &url, guarantee, pace, partitions, linger).await,
                ));
            }
        }
    }

    println!("\n### End-to-end latency at {} records/s\n", pace.rate);
    println!(
        "{} s at {} records/s after a {} s warm-up, each record stamped with its send time; topics of {LATENCY_PARTITIONS} partitions, one task, default batching (`batch.max.records` 500, `batch.max.ms` 100, `batch.linger.ms` 0: a batch closes when the consumer has no more records at hand), and each Sluice row again with `batch.linger.ms` 100 (each batch waits out `batch.max.ms`, as batches closed before 2026-12-03). Stream: received by a read_committed consumer of the output topic; sink: the row's insert time (`clock_timestamp()` in the database). The embedded broker holds each fetch for the consumer's whole `fetch.wait.max.ms` (a real broker answers once records are there), so the worker runs with `consumer.fetch.wait.max.ms` {FAST_FETCH_WAIT_MS}, as the baseline consumer does; the second row shows what librdkafka's default would add per hop here. Ratios to the first row\n",
        pace.measured.as_secs(),
        pace.rate,
        pace.warmup.as_secs()
    );
    println!("| pipeline | records | p50 ms | p99 ms | max ms | p50 vs broker | p99 vs broker |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let broker = (rows[0].1.p50, rows[0].1.p99);
    for (label, l) in &rows {
        println!(
            "| {label} | {} | {:.1} | {:.1} | {:.1} | {:.1}x | {:.1}x |",
            l.records,
            l.p50,
            l.p99,
            l.max,
            l.p50 / broker.0,
            l.p99 / broker.1
        );
    }
    println!();
    if python_rates.is_empty() {
        println!(
            "Python pipelines: not measured at this rate (run the pipeline1 and pipeline2 parts for their throughput)."
        );
    }
    for (pipeline, rate) in python_rates {
        match rate {
            Some(r) if *r < pace.rate as f64 => println!(
                "Python {pipeline}: not measured: it cannot sustain {} records/s (its throughput above: {r:.0} records/s), so its latency would only grow with the backlog.",
                pace.rate
            ),
            Some(_) => println!("Python {pipeline}: sustains the rate; latency not measured."),
            None => println!("Python {pipeline}: not run."),
        }
    }
}

/// Worker keys: its consumers fetch as the bench's fast consumer does.
fn fast_fetch() -> serde_json::Value {
    serde_json::json!({"consumer.fetch.wait.max.ms": FAST_FETCH_WAIT_MS})
}

/// Pipeline 1's latency: rows carry their send time and, by a column
/// default, the time they were inserted.
async fn sink_latency(
    bench: &mut Bench,
    url: &str,
    guarantee: &str,
    pace: &Pace,
    partitions: i32,
    linger: Option<&str>,
) -> Latency {
    let worker = bench.worker_with(fast_fetch()).await;
    sink_latency_on(bench, &worker, url, guarantee, pace, partitions, linger).await
}

/// [`sink_latency`] on a worker already started.
async fn sink_latency_on(
    bench: &mut Bench,
    worker: &SluiceProcess,
    url: &str,
    guarantee: &str,
    pace: &Pace,
    partitions: i32,
    linger: Option<&str>,
) -> Latency {
    let input = bench.create_topic("latency-sink-in", partitions).await;
    let table = bench.unique("latency_sink").replace('-', "_");
    // Made here too: `latency` may run without `pipeline1` before it.
    pg_exec(
        url,
        &sluice_connector_jdbc::Dialect::Postgres.create_offsets_table("sluice_offsets"),
    )
    .await;
    pg_exec(
        url,
        &format!(
            "DROP TABLE IF EXISTS {table}; DELETE FROM sluice_offsets; \
             CREATE TABLE {table} (order_id BIGINT PRIMARY KEY, customer_id TEXT, amount DOUBLE PRECISION, \
             currency TEXT, status TEXT, updated_at TEXT, processed_by TEXT, sent_at_us BIGINT, \
             written_at_us BIGINT NOT NULL DEFAULT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)"
        ),
    )
    .await;
    let name = bench.unique("latency-sink");
    let mut config = bench.sink_config(url, &input, &table, guarantee, None);
    if let Some(ms) = linger {
        config["batch.linger.ms"] = ms.into();
    }
    config["auto.create"] = "false".into();
    worker
        .create_connector(&serde_json::json!({"name": name, "config": config}))
        .await;
    send_probe(&bench.bootstrap, &input, pace).await;
    while table_rows(url, &table).await == 0 {
        worker.assert_running(&name).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    produce_paced(&bench.bootstrap, &input, pace).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    while table_rows(url, &table).await < pace.total() as i64 + 1 {
        assert!(Instant::now() < deadline, "{table}: rows missing");
        worker.assert_running(&name).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (p50, p99, max, records): (f64, f64, i64, i64) = sqlx::query_as(&format!(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY written_at_us - sent_at_us), \
                percentile_cont(0.99) WITHIN GROUP (ORDER BY written_at_us - sent_at_us), \
                max(written_at_us - sent_at_us), count(*) \
         FROM {table} WHERE order_id >= $1 AND order_id < $2"
    ))
    .bind(pace.measured_ids().start as i64)
    .bind(pace.measured_ids().end as i64)
    .fetch_one(
        &mut sqlx::PgConnection::connect(url)
            .await
            .unwrap_or_else(|e| panic!("connecting to {url}: {e}")),
    )
    .await
    .unwrap_or_else(|e| panic!("latency percentiles of {table}: {e}"));
    Latency {
        p50: p50 / 1000.0,
        p99: p99 / 1000.0,
        max: max as f64 / 1000.0,
        records: records as u64,
    }
}

/// Part 4: memory idle, and under load with many connectors.
async fn memory(bench: &mut Bench, idle: Duration, connectors: usize, records_each: usize) {
    let mut idle_rows = Vec::new();
    for (label, external) in [
        ("against a Kafka cluster (the bench's broker)", true),
        ("zero setup: the embedded broker in the worker", false),
    ] {
        eprintln!("memory: idle worker, {label}...");
        let worker = if external {
            bench.worker().await
        } else {
            SluiceProcess::start(None, &bench.wasm_cache, serde_json::json!({})).await
        };
        tokio::time::sleep(idle).await;
        idle_rows.push((label, worker.stats()));
    }

    eprintln!(
        "memory: {connectors} stream connectors with the transform, {records_each} records each..."
    );
    let mut configs = Vec::new();
    let mut outputs = Vec::new();
    for _ in 0..connectors {
        let input = bench
            .filled_topic("load-in", records_each, partitions_for(records_each))
            .await;
        let output = bench.create_topic("load-out", input.partitions).await;
        configs.push(bench.stream_config(&input, &output, 1, true, Some(bench.stream_batch)));
        outputs.push(output);
    }
    let total = connectors * records_each;
    let load = bench
        .run_sluice(configs.clone(), total, Delivered::Topics(&outputs))
        .await;
    // The same load again, with each consumer prefetching as it did before
    // the smaller defaults: the baseline of the ratio.
    eprintln!("memory: the same load with the former per-task prefetch...");
    let mut again_outputs = Vec::new();
    let mut again_configs = Vec::new();
    for config in &configs {
        let output = bench
            .create_topic("load-out", partitions_for(records_each))
            .await;
        let mut config = config.clone();
        config["output.topic"] = output.name.clone().into();
        again_configs.push(config);
        again_outputs.push(output);
    }
    let former = bench
        .run_sluice_with(
            again_configs,
            total,
            Delivered::Topics(&again_outputs),
            serde_json::json!({
                "consumer.queued.min.messages": "20000",
                "consumer.queued.max.messages.kbytes": "16384",
                "consumer.fetch.max.bytes": "52428800",
            }),
        )
        .await;

    println!("\n### Worker memory\n");
    println!(
        "Resident memory of `sluice standalone` with no connectors, {} s after start; target: under 50 MiB\n",
        idle.as_secs()
    );
    println!(
        "| worker | RSS MiB | of which anonymous | of which file-backed | peak RSS MiB | under 50 MiB |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    for (label, s) in &idle_rows {
        println!(
            "| idle, {label} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
            mib(s.rss_kib),
            mib(s.rss_anon_kib),
            mib(s.rss_file_kib),
            mib(s.peak_rss_kib),
            yes_or_no(mib(s.rss_kib) < 50.0)
        );
    }
    println!(
        "\nUnder load: {connectors} stream connectors in one worker, each exactly-once with the WASM transform over its own topic of {records_each} orders, all at once\n"
    );
    println!(
        "| worker | total records/s | CPU s per 1M records | peak RSS MiB | peak RSS ratio | under 150 MiB |"
    );
    println!("|---|---:|---:|---:|---:|---|");
    println!(
        "| {connectors} connectors, each task prefetching as before (16 MiB, 20,000 records, 50 MiB fetches) | {} | 1.00 | {} |",
        former.cells(),
        yes_or_no(mib(former.peak_rss_kib) <= 150.0)
    );
    println!(
        "| {connectors} connectors, the defaults | {} | {:.2} | {} |",
        load.cells(),
        load.peak_rss_kib as f64 / former.peak_rss_kib as f64,
        yes_or_no(mib(load.peak_rss_kib) <= 150.0)
    );
}

/// Worker keys for every worker the bench starts against its broker
/// (`SLUICE_BENCH_WORKER_KEYS`, a JSON object; none by default): to try
/// settings without a rebuild.
fn bench_worker_keys() -> serde_json::Value {
    let Ok(json) = std::env::var("SLUICE_BENCH_WORKER_KEYS") else {
        return serde_json::json!({});
    };
    match serde_json::from_str::<serde_json::Value>(&json) {
        Ok(keys) if keys.is_object() => keys,
        Ok(other) => panic!("SLUICE_BENCH_WORKER_KEYS is not a JSON object: {other}"),
        Err(e) => panic!("SLUICE_BENCH_WORKER_KEYS is not a JSON object: {e}"),
    }
}

/// A target's cell: met or not, loudly.
fn yes_or_no(met: bool) -> &'static str {
    if met { "yes" } else { "NO" }
}

/// Part 5: tasks, and records per run.
async fn scaling(bench: &mut Bench, n: usize, tasks: &[usize], sizes: &[usize]) {
    let mut by_tasks = Vec::new();
    for &t in tasks {
        by_tasks.push((
            t,
            bench.stream_with_transform(n, partitions_for(n), t).await,
        ));
    }
    // One partition count for every size, so only the size changes (how
    // many partitions a transaction spans is a cost of its own), and the
    // input fed as the run goes, so any size fits the embedded broker.
    let size_partitions = partitions_for(n);
    let mut by_size = Vec::new();
    for &s in sizes {
        by_size.push((s, bench.stream_fed(s, size_partitions).await));
    }
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    println!("\n### Scaling\n");
    println!(
        "Pipeline 2 (Kafka -> WASM transform -> Kafka, exactly-once, `batch.max.records` {}); the machine has {cores} cores, shared by the worker, the broker and the bench. By tasks, {n} records; ratios to the first row\n",
        bench.stream_batch
    );
    println!("| tasks | records/s | CPU s per 1M records | peak RSS MiB | records/s ratio |");
    println!("|---:|---:|---:|---:|---:|");
    for (t, m) in &by_tasks {
        println!(
            "| {t} | {} | {:.2} |",
            m.cells(),
            m.records_per_second() / by_tasks[0].1.records_per_second()
        );
    }
    println!(
        "\nBy records per run, one task, topics of {size_partitions} partitions, the input produced while the run goes (at most {FED_RECORDS_PER_PARTITION} records a partition ahead: the embedded broker keeps ~5 MiB per partition), so the producer shares the machine; flat per record is the goal; ratios to the first row\n"
    );
    println!(
        "| records | records/s | CPU s per 1M records | peak RSS MiB | CPU per record ratio |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for (s, m) in &by_size {
        println!(
            "| {s} | {} | {:.2} |",
            m.cells(),
            m.cpu_per_million() / by_size[0].1.cpu_per_million()
        );
    }
}

/// Pipelines 1 and 2 on the embedded broker and on a real Apache Kafka, one
/// after the other in this run: what a broker that writes (and replicates)
/// its records and transaction markers costs.
async fn on_real_kafka(embedded: &mut Bench, kafka: &mut Bench, n: usize, sink_batch: usize) {
    let url = embedded
        .postgres
        .clone()
        .expect("SLUICE_BENCH_POSTGRES_URL: run through bench/run.sh, which starts PostgreSQL");
    pg_exec(
        &url,
        &sluice_connector_jdbc::Dialect::Postgres.create_offsets_table("sluice_offsets"),
    )
    .await;
    let mut rows: Vec<(String, Vec<Measured>)> = Vec::new();
    for (label, guarantee) in [
        (
            "pipeline 1: jdbc-sink, at-least-once",
            Some("at-least-once"),
        ),
        ("pipeline 1: jdbc-sink, exactly-once", Some("exactly-once")),
        ("pipeline 2: stream, exactly-once, WASM transform", None),
    ] {
        let mut measured = Vec::new();
        for bench in [&mut *embedded, &mut *kafka] {
            let input = bench.orders(n, partitions_for(n)).await;
            eprintln!("{label}, {}, {n} records...", bench.broker.label());
            let m = match guarantee {
                Some(guarantee) => {
                    let table = bench.unique("on_kafka").replace('-', "_");
                    pg_exec(
                        &url,
                        &format!("DROP TABLE IF EXISTS {table}; DELETE FROM sluice_offsets"),
                    )
                    .await;
                    common::wait_for_quiet_database(&url).await;
                    let config =
                        bench.sink_config(&url, &input, &table, guarantee, Some(sink_batch));
                    let to = Delivered::Table {
                        url: &url,
                        table: &table,
                    };
                    let m = bench.run_sluice(vec![config], n, to).await;
                    pg_exec(&url, &format!("DROP TABLE IF EXISTS {table}")).await;
                    m
                }
                None => {
                    let output = bench.create_topic("stream-out", input.partitions).await;
                    let batch = Some(bench.stream_batch);
                    let config = bench.stream_config(&input, &output, 1, true, batch);
                    bench
                        .run_sluice(vec![config], n, Delivered::Topics(&[output]))
                        .await
                }
            };
            measured.push(m);
        }
        rows.push((label.to_string(), measured));
    }
    println!("\n### On Apache Kafka\n");
    println!(
        "{n} JSON order records, {} partitions, one task, the same runs on the embedded broker and on Apache Kafka (one KRaft broker from scripts/kafka.sh, on this machine); sink `batch.max.records` {sink_batch}, a stream transaction per {} records\n",
        partitions_for(n),
        embedded.stream_batch
    );
    println!(
        "| pipeline | embedded records/s | Kafka records/s | Kafka / embedded | embedded CPU s per 1M | Kafka CPU s per 1M |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (label, m) in &rows {
        println!(
            "| {label} | {:.0} | {:.0} | {:.2} | {:.1} | {:.1} |",
            m[0].records_per_second(),
            m[1].records_per_second(),
            m[1].records_per_second() / m[0].records_per_second(),
            m[0].cpu_per_million(),
            m[1].cpu_per_million()
        );
    }
    let split: Vec<(String, &Measured)> = rows
        .iter()
        .flat_map(|(label, m)| {
            [
                (format!("{label}, embedded"), &m[0]),
                (format!("{label}, Apache Kafka"), &m[1]),
            ]
        })
        .collect();
    print_cpu_split(&split);
}

/// What the bad-password clients of [`auth_flood`] got back.
#[derive(Default)]
struct FloodAnswers {
    unauthorized: std::sync::atomic::AtomicU64,
    busy: std::sync::atomic::AtomicU64,
    other: std::sync::atomic::AtomicU64,
}

/// Part 7: the sink's latency (pipeline 1 at the latency part's pace, at
/// least once) on a worker with basic authentication, alone and while
/// `clients` concurrent clients send requests with a wrong password (each
/// one costs the worker an Argon2 verification). The REST API bounds that
/// work (one verification at a time, a 503 after 10 s of waiting), so the
/// pipeline keeps most of the machine.
async fn auth_flood(bench: &mut Bench, pace: &Pace, clients: usize) {
    use std::sync::atomic::Ordering::Relaxed;
    let Some(url) = bench.postgres.clone() else {
        println!(
            "\n### REST authentication under a bad-password flood\n\nNOT RUN: set SLUICE_BENCH_POSTGRES_URL"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    let users = dir.path().join("users");
    let hash = sluice_runtime::auth::hash_password("bench-password").expect("hashing");
    std::fs::write(&users, format!("bench:{hash}\n")).expect("writing the users file");
    let mut keys = fast_fetch();
    keys["rest.auth.users.file"] = users.display().to_string().into();
    keys["rest.auth.health.open"] = "true".into();
    let mut rows = Vec::new();
    // None: no flood; Some(false): each client repeats its wrong password
    // (a stale secret); Some(true): a new guess every request.
    for flood in [None, Some(false), Some(true)] {
        let label = match flood {
            None => "basic auth on, no other requests (baseline)".to_string(),
            Some(false) => format!("{clients} clients, each repeating its wrong password"),
            Some(true) => format!("{clients} clients, a new wrong password every request"),
        };
        eprintln!("authflood: Sluice jdbc-sink, {label}...");
        let worker = bench
            .worker_with(keys.clone())
            .await
            .with_credentials("bench", "bench-password");
        // The operator's client has been using the API: its credentials
        // are remembered before the flood begins.
        worker.records_ok("put").await;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let answers = std::sync::Arc::new(FloodAnswers::default());
        let mut flooders = Vec::new();
        if let Some(fresh) = flood {
            let http = reqwest::Client::builder()
                .pool_max_idle_per_host(clients)
                .build()
                .expect("an HTTP client");
            for i in 0..clients {
                let (http, stop, answers) = (http.clone(), stop.clone(), answers.clone());
                let url = format!("{}/connectors", worker.rest());
                flooders.push(tokio::spawn(async move {
                    let mut guess = 0u64;
                    while !stop.load(Relaxed) {
                        let password = if fresh {
                            guess += 1;
                            format!("wrong-{i}-{guess}")
                        } else {
                            format!("wrong-{i}")
                        };
                        let answer = http
                            .get(&url)
                            .basic_auth("bench", Some(password))
                            .send()
                            .await;
                        let counter = match answer.map(|r| r.status().as_u16()) {
                            Ok(401) => &answers.unauthorized,
                            Ok(503) => &answers.busy,
                            _ => &answers.other,
                        };
                        counter.fetch_add(1, Relaxed);
                    }
                }));
            }
        }
        let started = Instant::now();
        let cpu_before = worker.stats().cpu_seconds;
        let latency = sink_latency_on(
            bench,
            &worker,
            &url,
            "at-least-once",
            pace,
            LATENCY_PARTITIONS,
            None,
        )
        .await;
        let cpu = worker.stats().cpu_seconds - cpu_before;
        stop.store(true, Relaxed);
        for f in flooders {
            let _ = f.await;
        }
        let seconds = started.elapsed().as_secs_f64();
        rows.push((label, latency, answers, seconds, cpu));
    }
    println!("\n### REST authentication under a bad-password flood\n");
    println!(
        "Pipeline 1's sink (at-least-once, WASM transform) at {} records/s for {} s after a {} s warm-up, on a worker with `rest.auth.users.file`, measured as in the latency table; in the other rows {clients} concurrent clients send `GET /connectors` with wrong passwords the whole time, each either repeating one (verified once, then refused from memory) or guessing anew (an Argon2 verification each, one at a time, a 503 after 10 s waiting). Ratios to the first row.\n",
        pace.rate,
        pace.measured.as_secs(),
        pace.warmup.as_secs()
    );
    println!(
        "| run | records | p50 ms | p99 ms | max ms | p50 ratio | p99 ratio | worker CPU s | answers 401 | 503 | other |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let base = (rows[0].1.p50, rows[0].1.p99);
    for (label, l, answers, _seconds, cpu) in &rows {
        println!(
            "| {label} | {} | {:.1} | {:.1} | {:.1} | {:.2}x | {:.2}x | {cpu:.1} | {} | {} | {} |",
            l.records,
            l.p50,
            l.p99,
            l.max,
            l.p50 / base.0,
            l.p99 / base.1,
            answers.unauthorized.load(Relaxed),
            answers.busy.load(Relaxed),
            answers.other.load(Relaxed),
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing
    }
    const PARTS: [&str; 9] = [
        "pipeline1",
        "pipeline2",
        "latency",
        "memory",
        "kafka",
        "scaling",
        "authflood",
        "typed",
        "instructions",
    ];
    let parts = env_list("SLUICE_BENCH_PIPELINES", &PARTS.join(","));
    if let Some(unknown) = parts.iter().find(|p| !PARTS.contains(&p.as_str())) {
        panic!("SLUICE_BENCH_PIPELINES: unknown part `{unknown}`; the parts are {PARTS:?}");
    }
    let n = env_usize("SLUICE_BENCH_PIPELINE_RECORDS", 1_000_000);
    let py_n = env_usize("SLUICE_BENCH_PY_RECORDS", 20_000).min(n);
    let sink_batch = env_usize("SLUICE_BENCH_SINK_BATCH", 5000);
    let pace = Pace {
        rate: env_usize("SLUICE_BENCH_LATENCY_RATE", 10_000),
        warmup: Duration::from_secs(env_usize("SLUICE_BENCH_LATENCY_WARMUP_SECONDS", 5) as u64),
        measured: Duration::from_secs(env_usize("SLUICE_BENCH_LATENCY_SECONDS", 20) as u64),
    };
    let wasm_module =
        guest_build::build_guest("examples/transforms/rust", "sluice_example_transform.wasm");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let embedded =
            BenchBroker::Embedded(EmbeddedBroker::start().expect("the embedded broker starts"));
        let stream_batch = env_usize("SLUICE_BENCH_STREAM_BATCH", 1000);
        let mut bench = Bench::new(embedded, wasm_module.clone(), stream_batch);
        let wants = |part: &str| parts.iter().any(|p| p == part);
        let mut python_rates = vec![];
        if wants("pipeline1") {
            python_rates.push((
                "pipeline 1",
                pipeline1(&mut bench, n, py_n, sink_batch).await,
            ));
        }
        if wants("pipeline2") {
            python_rates.push(("pipeline 2", pipeline2(&mut bench, n, py_n).await));
        }
        if wants("latency") {
            latency(&mut bench, &pace, &python_rates).await;
        }
        if wants("memory") {
            memory(
                &mut bench,
                Duration::from_secs(env_usize("SLUICE_BENCH_IDLE_SECONDS", 5) as u64),
                env_usize("SLUICE_BENCH_LOAD_CONNECTORS", 10),
                env_usize("SLUICE_BENCH_LOAD_RECORDS", 100_000),
            )
            .await;
        }
        if wants("kafka") {
            match BenchBroker::real_from_env() {
                Some(real) => {
                    let mut on_kafka = Bench::new(real, wasm_module.clone(), stream_batch);
                    on_kafka.next_id = 1_000_000 + std::process::id() as usize * 1000;
                    on_real_kafka(&mut bench, &mut on_kafka, n, sink_batch).await;
                }
                None => println!(
                    "\n### On Apache Kafka\n\nNOT RUN: set SLUICE_BENCH_KAFKA_BOOTSTRAP (bench/run.sh starts a broker with scripts/kafka.sh)"
                ),
            }
        }
        if wants("typed") {
            typed(&mut bench, n, sink_batch).await;
        }
        if wants("authflood") {
            auth_flood(
                &mut bench,
                &pace,
                env_usize("SLUICE_BENCH_FLOOD_CLIENTS", 500),
            )
            .await;
        }
        if wants("instructions") {
            instructions(
                &mut bench,
                env_usize("SLUICE_BENCH_COUNTED_SMALL", 10_000),
                env_usize("SLUICE_BENCH_COUNTED_LARGE", 40_000),
                sink_batch,
            )
            .await;
        }
        if wants("scaling") {
            scaling(
                &mut bench,
                n,
                &env_usizes("SLUICE_BENCH_SCALING_TASKS", "1,2,4"),
                &env_usizes("SLUICE_BENCH_SCALING_SIZES", "100000,1000000,10000000"),
            )
            .await;
        }
    });
}
