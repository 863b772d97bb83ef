//! Sluice side by side with Apache Kafka Connect (4.1.1, the jars
//! `scripts/kafka-connect.sh` resolves from Maven), on the same Apache Kafka
//! broker, the same PostgreSQL and the same records, in one run:
//!
//! - (a) Kafka -> file sink: Kafka Connect's `FileStreamSink` with
//!   `StringConverter` (each value written verbatim as a line), Sluice's
//!   `file-sink`;
//! - (b) Kafka -> PostgreSQL upsert by `order_id`: Debezium's JDBC sink
//!   (`io.debezium.connector.jdbc.JdbcSinkConnector`), which needs records
//!   with a schema, reads a topic of `JsonConverter` envelopes
//!   (`schemas.enable=true`); Sluice's `jdbc-sink` reads the same topic with
//!   `value.converter.schemas.enable=true` (when Sluice refuses or fails on
//!   it, the row is run on the plain JSON topic and says so);
//! - (c) both with one transform: in Kafka Connect an SMT chain
//!   (`InsertField$Value` static field, `ReplaceField$Value` rename,
//!   `Cast$Value`), in Sluice the WASM reference transform
//!   (`examples/transforms/rust`) and, in a second row, the same SMT chain
//!   from the standard library (`plugins/transforms`);
//! - (d) change data capture, PostgreSQL -> Kafka: Debezium's PostgreSQL
//!   connector and Sluice's `postgres-cdc` with the same config, on a
//!   snapshot of SLUICE_BENCH_KC_CDC_ROWS rows and on as many streamed
//!   inserts; records counted in the topic.
//!
//!     bench/run.sh kafka-connect    (starts Apache Kafka and PostgreSQL, resolves Kafka Connect)
//!
//! Each row has its own worker process, started by the bench: Kafka
//! Connect's standalone worker (`ConnectStandalone`, the JVM started here
//! with the heap and JVM options of Apache Kafka's `connect-standalone.sh`
//! and `kafka-run-class.sh`) or `sluice standalone`, one task, so the CPU
//! and memory in `/proc/PID` are that worker's alone. Per row:
//!
//! - records/s and CPU seconds per million records, from the first record
//!   seen at the destination to the last (the JVM's start, class loading
//!   and the consumer group's join are not in them);
//! - idle RSS: `VmRSS` once the REST API answers and the worker has sat
//!   idle for SLUICE_BENCH_KC_IDLE_SECONDS, before the connector is made;
//!   peak RSS: `VmHWM` at the end;
//! - time from process start to the first record at the destination (the
//!   idle pause is left out), and the CPU seconds spent until then.
//!
//! Progress is watched at the destination for both workers alike: the
//! file's lines (read as they are appended), or, for the tables, whether
//! the last order of every partition is there (a partition is consumed in
//! order, so its last row is written last), then a `count(*)` confirms.
//!
//! Environment (defaults in brackets):
//! - SLUICE_BENCH_KAFKA_BOOTSTRAP (required): the broker (`scripts/kafka.sh`);
//! - SLUICE_BENCH_POSTGRES_URL (required for the JDBC rows);
//! - SLUICE_BENCH_KAFKA_CONNECT_HOME [~/.cache/sluice/kafka-connect-4.1.1]:
//!   Kafka Connect's `libs/` and `plugins/` as `scripts/kafka-connect.sh`
//!   caches them; SLUICE_BENCH_KAFKA_CONNECT_PLUGIN_PATH [connect-file and
//!   the `debezium-jdbc-*` directory there]: the script's `plugin.path`
//!   (`bench/run.sh` passes the one `scripts/kafka-connect.sh resolve`
//!   prints); SLUICE_BENCH_JAVA [$JAVA_HOME/bin/java, else java];
//! - SLUICE_BENCH_KC_RECORDS [1000000]; SLUICE_BENCH_KC_PARTITIONS [16];
//!   SLUICE_BENCH_KC_CDC_ROWS [200000];
//! - SLUICE_BENCH_KC_HEAP ["-Xms256M -Xmx2G", `connect-standalone.sh`'s];
//! - SLUICE_BENCH_KC_IDLE_SECONDS [5];
//! - SLUICE_BENCH_KC_FILE_DIR [/var/tmp]: where the file sinks write (on
//!   this disk Sluice's `file-sink` syncs each batch; `FileStreamSink`
//!   never syncs);
//! - SLUICE_BENCH_KC_SLUICE_CONFIG: a JSON object of more keys for every
//!   Sluice connector (e.g. `{"batch.max.records":"5000"}`), named in the
//!   rows' labels;
//! - SLUICE_BENCH_KC_PERF: a directory; each Sluice row is then profiled
//!   (`perf record -g`) from its first record to its last, into it;
//! - SLUICE_BENCH_KC_PIPELINES: which, comma-separated
//!   [file,jdbc,file-transform,jdbc-transform,cdc-snapshot,cdc-stream].

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use sqlx::Connection;

#[path = "../../tests/fixtures/guest_build.rs"]
#[allow(dead_code)] // shared with the tests, which also build native plugins
mod guest_build;

mod common;
use common::process::{ProcStats, SluiceProcess, mib};
use common::{BenchBroker, await_delivery, order_json, order_producer, send_order};

/// `kafka-run-class.sh`'s default `KAFKA_JVM_PERFORMANCE_OPTS` (Kafka 4.1).
const JVM_PERFORMANCE_OPTS: [&str; 7] = [
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
];
/// `connect-standalone.sh`'s default `KAFKA_HEAP_OPTS`.
const DEFAULT_HEAP: &str = "-Xms256M -Xmx2G";
/// Kafka Connect's default `offset.flush.interval.ms`, stated.
const KC_OFFSET_FLUSH_MS: u64 = 60_000;

const STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
const JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";
const DEBEZIUM_JDBC_SINK: &str = "io.debezium.connector.jdbc.JdbcSinkConnector";

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: expected a whole number")),
        Err(_) => default,
    }
}

/// The SMT chain, the same keys in Kafka Connect and in Sluice (whose
/// standard library answers to Kafka Connect's class names).
fn smt_chain(config: &mut serde_json::Value) {
    for (k, v) in [
        ("transforms", "insert,rename,cast"),
        (
            "transforms.insert.type",
            "org.apache.kafka.connect.transforms.InsertField$Value",
        ),
        ("transforms.insert.static.field", "pipeline"),
        ("transforms.insert.static.value", "bench"),
        (
            "transforms.rename.type",
            "org.apache.kafka.connect.transforms.ReplaceField$Value",
        ),
        ("transforms.rename.renames", "customer_id:customer"),
        (
            "transforms.cast.type",
            "org.apache.kafka.connect.transforms.Cast$Value",
        ),
        ("transforms.cast.spec", "amount:string"),
    ] {
        config[k] = v.into();
    }
}

/// The order as a `JsonConverter` envelope (`schemas.enable=true`).
fn order_envelope(i: usize) -> String {
    const SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"order_id"},{"type":"string","optional":false,"field":"customer_id"},{"type":"double","optional":false,"field":"amount"},{"type":"string","optional":false,"field":"currency"},{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"updated_at"}],"optional":false,"name":"bench.Order"}"#;
    format!(r#"{{"schema":{SCHEMA},"payload":{}}}"#, order_json(i))
}

/// `uptime`'s line: the machine's load, noted before and after each run.
fn uptime() -> String {
    Command::new("uptime")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("(uptime: {e})"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Kafka Connect as `scripts/kafka-connect.sh` caches it.
struct KafkaConnectInstall {
    java: String,
    libs: PathBuf,
    /// `plugin.path`: connect-file and, if it resolved, Debezium's JDBC
    /// sink, the directories the script's workers have.
    plugin_path: String,
    jdbc_sink: bool,
    /// Debezium's PostgreSQL source is in `plugin_path`.
    postgres_source: bool,
    heap: Vec<String>,
}

impl KafkaConnectInstall {
    fn find() -> Self {
        let home = std::env::var("SLUICE_BENCH_KAFKA_CONNECT_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|_| {
                Path::new(&std::env::var("HOME").expect("HOME"))
                    .join(".cache/sluice/kafka-connect-4.1.1")
            });
        let libs = home.join("libs");
        assert!(
            libs.join(".complete").exists(),
            "Kafka Connect's jars are not in {} (run `scripts/kafka-connect.sh resolve` once, or bench/run.sh kafka-connect)",
            libs.display()
        );
        let plugins = home.join("plugins");
        let complete = |dir: &Path, inner: &str| dir.join(inner).join(".complete").exists();
        let file_plugin = plugins.join("connect-file");
        assert!(
            complete(&file_plugin, "connect-file"),
            "connect-file is not in {}",
            file_plugin.display()
        );
        // A Debezium plugin the script resolved: `<prefix>*/<inner>/`.
        let resolved = |prefix: &str, inner: &str| {
            std::fs::read_dir(&plugins)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
                })
                .find(|p| complete(p, inner))
        };
        let jdbc = resolved("debezium-jdbc-", "debezium-connector-jdbc");
        // The script's plugin.path, Debezium's directory laid out as the
        // script lays it out (no Jackson of its own: see
        // scripts/kafka-connect.sh).
        let given = std::env::var("SLUICE_BENCH_KAFKA_CONNECT_PLUGIN_PATH").unwrap_or_default();
        let postgres = resolved("debezium-postgres-", "debezium-connector-postgres");
        let names = |path: &str, prefix: &str| {
            path.split(',').any(|entry| {
                Path::new(entry)
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
            })
        };
        let plugin_path = if !given.is_empty() {
            given
        } else {
            std::iter::once(file_plugin.display().to_string())
                .chain(jdbc.iter().map(|j| j.display().to_string()))
                .chain(postgres.iter().map(|p| p.display().to_string()))
                .collect::<Vec<_>>()
                .join(",")
        };
        let jdbc_sink = names(&plugin_path, "debezium-jdbc-");
        let postgres_source = names(&plugin_path, "debezium-postgres-");
        let java = std::env::var("SLUICE_BENCH_JAVA").unwrap_or_else(|_| {
            std::env::var("JAVA_HOME")
                .map(|h| format!("{h}/bin/java"))
                .unwrap_or_else(|_| "java".into())
        });
        let heap = std::env::var("SLUICE_BENCH_KC_HEAP")
            .unwrap_or_else(|_| DEFAULT_HEAP.into())
            .split_whitespace()
            .map(String::from)
            .collect();
        Self {
            java,
            libs,
            plugin_path,
            jdbc_sink,
            postgres_source,
            heap,
        }
    }

    fn jvm_options(&self) -> String {
        let mut all = self.heap.clone();
        all.extend(JVM_PERFORMANCE_OPTS.iter().map(|s| s.to_string()));
        all.join(" ")
    }
}

/// A Kafka Connect standalone worker, started by the bench (so its pid is
/// the JVM's) with no connectors; killed when dropped.
struct KafkaConnect {
    child: Child,
    rest: String,
    dir: Option<tempfile::TempDir>,
}

impl KafkaConnect {
    async fn start(install: &KafkaConnectInstall, bootstrap: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temp dir for Kafka Connect");
        let port = free_port();
        let d = dir.path();
        std::fs::write(
            d.join("worker.properties"),
            format!(
                "bootstrap.servers={bootstrap}
listeners=http://127.0.0.1:{port}
plugin.path={}
plugin.discovery=service_load
key.converter={STRING_CONVERTER}
value.converter={STRING_CONVERTER}
offset.storage.file.filename={}
offset.flush.interval.ms={KC_OFFSET_FLUSH_MS}
",
                install.plugin_path,
                d.join("offsets").display()
            ),
        )
        .expect("writing worker.properties");
        std::fs::write(
            d.join("log4j2.properties"),
            format!(
                "status=warn
appender.file.type=File
appender.file.name=file
appender.file.fileName={}
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c:%L)%n
rootLogger.level=INFO
rootLogger.appenderRef.file.ref=file
logger.reflections.name=org.reflections
logger.reflections.level=ERROR
logger.kafka.name=org.apache.kafka.clients
logger.kafka.level=WARN
",
                d.join("connect.log").display()
            ),
        )
        .expect("writing log4j2.properties");
        let out = std::fs::File::create(d.join("stdout.log")).expect("creating stdout.log");
        let child = Command::new(&install.java)
            .args(&install.heap)
            .args(JVM_PERFORMANCE_OPTS)
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                d.join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(format!("{}/*", install.libs.display()))
            .arg("org.apache.kafka.connect.cli.ConnectStandalone")
            .arg(d.join("worker.properties"))
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("a second handle"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", install.java));
        let mut kc = Self {
            child,
            rest: format!("http://127.0.0.1:{port}"),
            dir: Some(dir),
        };
        kc.wait_healthy().await;
        kc
    }

    fn log_tail(&self) -> String {
        let Some(dir) = &self.dir else {
            return String::new();
        };
        let log = std::fs::read_to_string(dir.path().join("connect.log")).unwrap_or_default()
            + &std::fs::read_to_string(dir.path().join("stdout.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    async fn wait_healthy(&mut self) {
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            let ok = http
                .get(format!("{}/health", self.rest))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ok {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "Kafka Connect exited while starting ({status}):\n{}",
                    self.log_tail()
                );
            }
            if started.elapsed() > Duration::from_secs(180) {
                panic!(
                    "Kafka Connect's /health did not answer 200 within 180 s:\n{}",
                    self.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for KafkaConnect {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("SLUICE_BENCH_KEEP_WORKER_LOGS").is_some()
            && let Some(dir) = self.dir.take()
        {
            let kept = dir.keep();
            eprintln!(
                "Kafka Connect log kept: {}",
                kept.join("connect.log").display()
            );
        }
    }
}

/// Either worker, as the measurement sees it: a pid and a REST API.
enum Worker {
    KafkaConnect(KafkaConnect),
    Sluice(SluiceProcess),
}

impl Worker {
    fn pid(&self) -> u32 {
        match self {
            Worker::KafkaConnect(k) => k.child.id(),
            Worker::Sluice(s) => s.pid(),
        }
    }
    fn rest(&self) -> &str {
        match self {
            Worker::KafkaConnect(k) => &k.rest,
            Worker::Sluice(s) => s.rest(),
        }
    }
    fn stats(&self) -> ProcStats {
        ProcStats::of(self.pid()).unwrap_or_else(|e| panic!("reading /proc: {e}"))
    }
    fn log_tail(&self) -> String {
        match self {
            Worker::KafkaConnect(k) => format!("\nlast lines of its log:\n{}", k.log_tail()),
            Worker::Sluice(_) => String::new(),
        }
    }

    async fn create(
        &self,
        http: &reqwest::Client,
        name: &str,
        config: &serde_json::Value,
    ) -> Result<(), String> {
        let response = http
            .post(format!("{}/connectors", self.rest()))
            .json(&serde_json::json!({"name": name, "config": config}))
            .send()
            .await
            .map_err(|e| format!("POST /connectors: {e}"))?;
        if response.status().is_success() {
            return Ok(());
        }
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        Err(format!("creating {name}: {status}: {body}"))
    }

    /// The trace of a FAILED connector or task, if one failed.
    async fn failure(&self, http: &reqwest::Client, name: &str) -> Option<String> {
        let status: serde_json::Value = http
            .get(format!("{}/connectors/{name}/status", self.rest()))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let failed = status["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&status["connector"]))
            .find(|t| t["state"] == "FAILED")?;
        let trace = failed["trace"].as_str().unwrap_or_default();
        // The first lines say what failed; a JVM trace goes on for pages.
        Some(trace.lines().take(6).collect::<Vec<_>>().join("\n"))
    }
}

/// Where a run's records arrive, watched the same way for both workers.
enum Destination {
    /// A file sink's output: lines counted as they are appended.
    File {
        path: PathBuf,
        file: Option<std::fs::File>,
        lines: u64,
    },
    /// An upsert table: `last_ids` holds the last order of each partition.
    Table {
        conn: sqlx::PgConnection,
        table: String,
        last_ids: Vec<i64>,
    },
    /// A CDC row's topic, counted by its high watermarks (inserts only, so
    /// one record per row); `table` is the captured table, and the slot
    /// and publication are the connector's.
    Topic {
        consumer: rdkafka::consumer::BaseConsumer,
        bootstrap: String,
        topic: String,
        conn: sqlx::PgConnection,
        table: String,
        slot: String,
    },
}

impl Destination {
    /// Records there so far, if any; for a table, only once the run has
    /// started (exact then: `count(*)` of a small table).
    async fn arrived(&mut self) -> Result<u64, String> {
        match self {
            Destination::File { path, file, lines } => {
                if file.is_none() {
                    match std::fs::File::open(&*path) {
                        Ok(f) => *file = Some(f),
                        Err(_) => return Ok(0),
                    }
                }
                let f = file.as_mut().expect("opened");
                let mut buf = [0u8; 64 * 1024];
                loop {
                    let read = f
                        .read(&mut buf)
                        .map_err(|e| format!("reading {}: {e}", path.display()))?;
                    if read == 0 {
                        break;
                    }
                    *lines += buf[..read].iter().filter(|&&b| b == b'\n').count() as u64;
                }
                Ok(*lines)
            }
            Destination::Table { conn, table, .. } => {
                // The worker creates the table when its first batch comes.
                let created: bool =
                    sqlx::query_scalar(&format!("SELECT to_regclass('{table}') IS NOT NULL"))
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(|e| format!("looking for {table}: {e}"))?;
                if !created {
                    return Ok(0);
                }
                let any: bool =
                    sqlx::query_scalar(&format!("SELECT EXISTS (SELECT 1 FROM {table})"))
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(|e| format!("reading {table}: {e}"))?;
                if !any {
                    return Ok(0);
                }
                count(conn, table).await
            }
            Destination::Topic {
                consumer, topic, ..
            } => Ok(topic_records(consumer, topic)),
        }
    }

    /// Whether all `n` records are there (cheap: no full count).
    async fn complete(&mut self, n: u64) -> Result<bool, String> {
        match self {
            Destination::File { .. } | Destination::Topic { .. } => Ok(self.arrived().await? >= n),
            Destination::Table {
                conn,
                table,
                last_ids,
            } => {
                let present: i64 = sqlx::query_scalar(&format!(
                    "SELECT count(*) FROM {table} WHERE order_id = ANY($1)"
                ))
                .bind(&*last_ids)
                .fetch_one(&mut *conn)
                .await
                .map_err(|e| format!("looking up the last orders in {table}: {e}"))?;
                Ok(present as usize == last_ids.len())
            }
        }
    }

    /// All records, counted in full: what confirms a run.
    async fn total(&mut self) -> Result<u64, String> {
        match self {
            Destination::File { .. } | Destination::Topic { .. } => self.arrived().await,
            Destination::Table { conn, table, .. } => count(conn, table).await,
        }
    }

    /// What arrived, briefly: the file's first line, or the table's first
    /// row (by `order_id`) as JSON; it shows what each pipeline wrote.
    async fn sample(&mut self) -> String {
        match self {
            Destination::File { path, .. } => std::fs::read(&*path)
                .ok()
                .and_then(|b| {
                    b.split(|&c| c == b'\n')
                        .next()
                        .map(|l| String::from_utf8_lossy(l).into_owned())
                })
                .unwrap_or_default(),
            Destination::Table { conn, table, .. } => sqlx::query_scalar::<_, String>(&format!(
                "SELECT row_to_json(t)::text FROM {table} t WHERE order_id = 1"
            ))
            .fetch_one(&mut *conn)
            .await
            .unwrap_or_else(|e| format!("(reading {table}: {e})")),
            Destination::Topic {
                consumer, topic, ..
            } => first_value(consumer, topic),
        }
    }

    /// Deletes what the run wrote.
    async fn clean(&mut self) {
        match self {
            Destination::File { path, file, .. } => {
                *file = None;
                let _ = std::fs::remove_file(&*path);
            }
            Destination::Table { conn, table, .. } => {
                let _ = sqlx::raw_sql(&format!("DROP TABLE IF EXISTS {table}"))
                    .execute(&mut *conn)
                    .await;
            }
            Destination::Topic {
                conn,
                table,
                slot,
                bootstrap,
                topic,
                ..
            } => {
                // The worker is gone; its slot is let go of shortly after.
                for _ in 0..60 {
                    let active: Option<bool> = sqlx::query_scalar(
                        "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
                    )
                    .bind(&*slot)
                    .fetch_optional(&mut *conn)
                    .await
                    .ok()
                    .flatten();
                    if active != Some(true) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                let _ = sqlx::raw_sql(&format!(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
                       WHERE slot_name = '{slot}';
                     DROP PUBLICATION IF EXISTS {slot};
                     DROP TABLE IF EXISTS {table}"
                ))
                .execute(&mut *conn)
                .await;
                delete_topics(bootstrap, &[topic.as_str()]).await;
            }
        }
    }
}

/// The records in `topic`: the sum of its partitions' high watermarks
/// (0 before it exists).
fn topic_records(consumer: &rdkafka::consumer::BaseConsumer, topic: &str) -> u64 {
    use rdkafka::consumer::Consumer;
    let Ok(metadata) = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) else {
        return 0;
    };
    metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .flat_map(|t| t.partitions())
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p.id(), Duration::from_secs(5))
                .map(|(_, high)| high.max(0) as u64)
                .unwrap_or(0)
        })
        .sum()
}

/// The value of the first record of `topic`'s partition 0, as text.
fn first_value(consumer: &rdkafka::consumer::BaseConsumer, topic: &str) -> String {
    use rdkafka::Message;
    use rdkafka::consumer::Consumer;
    let mut tpl = rdkafka::TopicPartitionList::new();
    if tpl
        .add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .is_err()
        || consumer.assign(&tpl).is_err()
    {
        return format!("(reading {topic} failed)");
    }
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            return String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
        }
    }
    format!("(no record read from {topic})")
}

async fn count(conn: &mut sqlx::PgConnection, table: &str) -> Result<u64, String> {
    sqlx::query_scalar::<_, i64>(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(conn)
        .await
        .map(|c| c as u64)
        .map_err(|e| format!("counting {table}: {e}"))
}

/// What a row measured.
struct Measured {
    records: u64,
    seconds: f64,
    cpu_seconds: f64,
    idle_rss_kib: u64,
    peak_rss_kib: u64,
    /// Process start to the first record at the destination, the idle
    /// pause left out; and the CPU seconds until then.
    start_to_first: f64,
    cpu_to_first: f64,
    load_before: String,
    load_after: String,
    /// What the pipeline wrote for one order.
    sample: String,
}

impl Measured {
    fn records_per_second(&self) -> f64 {
        self.records as f64 / self.seconds
    }
    fn cpu_per_million(&self) -> f64 {
        self.cpu_seconds / self.records as f64 * 1e6
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Sink {
    File,
    Jdbc,
    /// Change data capture: PostgreSQL into a Kafka topic, whose records
    /// are counted (the `CdcPhase` says which).
    Topic(CdcPhase),
}

/// Which part of change data capture a CDC row measures.
#[derive(Clone, Copy, PartialEq)]
enum CdcPhase {
    /// The initial snapshot of a table of `cdc_rows` rows.
    Snapshot,
    /// `cdc_rows` inserts, in transactions of 1000 rows, written once the
    /// connector streams (no snapshot).
    Stream,
}

#[derive(Clone, Copy, PartialEq)]
enum Runner {
    KafkaConnect,
    /// Sluice with no transform, or with the WASM reference transform in
    /// the transform pipelines.
    Sluice,
    /// Sluice with the SMT chain from the standard library.
    SluiceSmt,
}

struct Pipeline {
    key: &'static str,
    label: &'static str,
    sink: Sink,
    transform: bool,
}

const PIPELINES: [Pipeline; 6] = [
    Pipeline {
        key: "file",
        label: "(a) Kafka -> file",
        sink: Sink::File,
        transform: false,
    },
    Pipeline {
        key: "jdbc",
        label: "(b) Kafka -> PostgreSQL upsert",
        sink: Sink::Jdbc,
        transform: false,
    },
    Pipeline {
        key: "file-transform",
        label: "(c) Kafka -> transform -> file",
        sink: Sink::File,
        transform: true,
    },
    Pipeline {
        key: "jdbc-transform",
        label: "(c) Kafka -> transform -> PostgreSQL upsert",
        sink: Sink::Jdbc,
        transform: true,
    },
    Pipeline {
        key: "cdc-snapshot",
        label: "(d) PostgreSQL snapshot -> Kafka (CDC)",
        sink: Sink::Topic(CdcPhase::Snapshot),
        transform: false,
    },
    Pipeline {
        key: "cdc-stream",
        label: "(d) PostgreSQL inserts streamed -> Kafka (CDC)",
        sink: Sink::Topic(CdcPhase::Stream),
        transform: false,
    },
];

/// The class both workers run for the CDC rows: Debezium's, which
/// Sluice's `postgres-cdc` also answers to.
const POSTGRES_SOURCE: &str = "io.debezium.connector.postgresql.PostgresConnector";

struct Bench {
    n: usize,
    /// Rows of each CDC row's table (snapshot) or inserts (stream).
    cdc_rows: usize,
    partitions: i32,
    broker: BenchBroker,
    postgres: Option<String>,
    install: KafkaConnectInstall,
    wasm_module: PathBuf,
    library: PathBuf,
    wasm_cache: PathBuf,
    idle: Duration,
    /// The plain JSON orders, and the same orders as envelopes.
    plain_topic: String,
    envelope_topic: String,
    out_dir: tempfile::TempDir,
    http: reqwest::Client,
    run_id: String,
    next: usize,
}

impl Bench {
    fn unique(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}_{}_{}", self.run_id, self.next)
    }

    /// The last order of each partition (orders go round-robin).
    fn last_ids(&self) -> Vec<i64> {
        let p = self.partitions as usize;
        (0..p.min(self.n))
            .map(|part| (part + (self.n - 1 - part) / p * p) as i64)
            .collect()
    }

    fn jdbc_url_parts(&self) -> (String, String, String) {
        let url = reqwest::Url::parse(self.postgres.as_deref().expect("a PostgreSQL URL"))
            .expect("SLUICE_BENCH_POSTGRES_URL is a URL");
        let jdbc = format!(
            "jdbc:postgresql://{}:{}{}",
            url.host_str().unwrap_or("127.0.0.1"),
            url.port().unwrap_or(5432),
            url.path()
        );
        let user = if url.username().is_empty() {
            "postgres".to_string()
        } else {
            url.username().to_string()
        };
        // Trust authentication on loopback ignores it; Debezium wants one.
        let password = url.password().unwrap_or("unused").to_string();
        (jdbc, user, password)
    }

    /// The connector config of one row, and a note on what it reads.
    fn config(
        &self,
        pipeline: &Pipeline,
        runner: Runner,
        destination: &str,
        envelopes: bool,
    ) -> serde_json::Value {
        if let Sink::Topic(phase) = pipeline.sink {
            return self.cdc_config(phase, runner, destination);
        }
        let mut c = match (pipeline.sink, runner) {
            (Sink::File, Runner::KafkaConnect) => serde_json::json!({
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "file": destination,
                // Verbatim lines; an SMT needs a Map, so with the chain
                // the values are parsed (schemaless JSON) and
                // FileStreamSink writes each Map's toString().
                "value.converter": if pipeline.transform { JSON_CONVERTER } else { STRING_CONVERTER },
                "value.converter.schemas.enable": "false",
            }),
            (Sink::File, _) => serde_json::json!({
                "connector.class": "file-sink",
                "file": destination,
            }),
            (Sink::Jdbc, Runner::KafkaConnect) => {
                let (url, user, password) = self.jdbc_url_parts();
                serde_json::json!({
                    "connector.class": DEBEZIUM_JDBC_SINK,
                    "connection.url": url,
                    "connection.username": user,
                    "connection.password": password,
                    "insert.mode": "upsert",
                    "primary.key.mode": "record_value",
                    "primary.key.fields": "order_id",
                    "schema.evolution": "basic",
                    "collection.name.format": destination,
                    "value.converter": JSON_CONVERTER,
                    "value.converter.schemas.enable": "true",
                })
            }
            (Sink::Topic(_), _) => unreachable!("made by cdc_config"),
            (Sink::Jdbc, _) => {
                let mut c = serde_json::json!({
                    "connector.class": "jdbc-sink",
                    "connection.url": self.postgres.as_deref().expect("a PostgreSQL URL"),
                    "insert.mode": "upsert",
                    "pk.mode": "record_value",
                    "pk.fields": "order_id",
                    "auto.create": "true",
                    "table.name.format": destination,
                    "delivery.guarantee": "at-least-once",
                });
                if envelopes {
                    c["value.converter"] = JSON_CONVERTER.into();
                    c["value.converter.schemas.enable"] = "true".into();
                }
                c
            }
        };
        c["tasks.max"] = "1".into();
        if runner != Runner::KafkaConnect {
            for (k, v) in sluice_extra().as_object().into_iter().flatten() {
                c[k] = v.clone();
            }
        }
        c["topics"] = if pipeline.sink == Sink::Jdbc && envelopes {
            self.envelope_topic.clone()
        } else {
            self.plain_topic.clone()
        }
        .into();
        if runner == Runner::KafkaConnect {
            c["key.converter"] = STRING_CONVERTER.into();
        }
        if pipeline.transform {
            match runner {
                Runner::KafkaConnect | Runner::SluiceSmt => smt_chain(&mut c),
                Runner::Sluice => {
                    for (k, v) in [
                        ("transforms", "enrich"),
                        ("transforms.enrich.type", "wasm"),
                        ("transforms.enrich.uppercase.field", "status"),
                        ("transforms.enrich.add.field", "processed_by"),
                        ("transforms.enrich.add.value", "sluice"),
                    ] {
                        c[k] = v.into();
                    }
                    c["transforms.enrich.module"] = self.wasm_module.to_string_lossy().into();
                }
            }
        }
        c
    }

    /// A CDC row's connector: the same config for Debezium and Sluice,
    /// capturing `table` into `<table>.public.<table>` through a slot and
    /// publication of the table's name, keys and values as JsonConverter
    /// envelopes with schemas (Debezium's default worker converters).
    fn cdc_config(&self, phase: CdcPhase, runner: Runner, table: &str) -> serde_json::Value {
        let url = reqwest::Url::parse(self.postgres.as_deref().expect("a PostgreSQL URL"))
            .expect("SLUICE_BENCH_POSTGRES_URL is a URL");
        let mut c = serde_json::json!({
            "connector.class": POSTGRES_SOURCE,
            "tasks.max": "1",
            "database.hostname": url.host_str().unwrap_or("127.0.0.1"),
            "database.port": url.port().unwrap_or(5432).to_string(),
            "database.user": if url.username().is_empty() { "postgres" } else { url.username() },
            "database.password": url.password().unwrap_or("unused"),
            "database.dbname": url.path().trim_start_matches('/'),
            "topic.prefix": table,
            "plugin.name": "pgoutput",
            "slot.name": table,
            "publication.name": table,
            "publication.autocreate.mode": "filtered",
            "table.include.list": format!("public.{table}"),
            "snapshot.mode": match phase {
                CdcPhase::Snapshot => "initial",
                CdcPhase::Stream => "no_data",
            },
            "key.converter": JSON_CONVERTER,
            "key.converter.schemas.enable": "true",
            "value.converter": JSON_CONVERTER,
            "value.converter.schemas.enable": "true",
        });
        if runner != Runner::KafkaConnect {
            for (k, v) in sluice_extra().as_object().into_iter().flatten() {
                c[k] = v.clone();
            }
        }
        c
    }

    async fn destination(&mut self, sink: Sink) -> (String, Destination) {
        match sink {
            Sink::Topic(phase) => {
                let table = self.unique("cdc_bench");
                let url = self.postgres.clone().expect("a PostgreSQL URL");
                let mut conn = sqlx::PgConnection::connect(&url)
                    .await
                    .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
                let mut setup = format!(
                    "CREATE TABLE {table} (id bigint PRIMARY KEY, customer text NOT NULL,
                       amount numeric(12,2) NOT NULL, placed timestamptz NOT NULL, note text);"
                );
                if phase == CdcPhase::Snapshot {
                    setup.push_str(&cdc_rows_sql(&table, 1, self.cdc_rows));
                }
                sqlx::raw_sql(&setup)
                    .execute(&mut conn)
                    .await
                    .unwrap_or_else(|e| panic!("creating {table}: {e}"));
                // On its own: VACUUM cannot run in a script's transaction.
                sqlx::raw_sql(&format!("VACUUM ANALYZE {table}"))
                    .execute(&mut conn)
                    .await
                    .unwrap_or_else(|e| panic!("vacuuming {table}: {e}"));
                let bootstrap = self.broker.bootstrap().to_string();
                let consumer = rdkafka::ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .set("group.id", format!("{table}-reader"))
                    .set("enable.auto.commit", "false")
                    .create()
                    .expect("a consumer");
                (
                    table.clone(),
                    Destination::Topic {
                        consumer,
                        bootstrap,
                        topic: format!("{table}.public.{table}"),
                        conn,
                        slot: table.clone(),
                        table,
                    },
                )
            }
            Sink::File => {
                let name = self.unique("out");
                let path = self.out_dir.path().join(format!("{name}.txt"));
                (
                    path.display().to_string(),
                    Destination::File {
                        path,
                        file: None,
                        lines: 0,
                    },
                )
            }
            Sink::Jdbc => {
                let table = self.unique("kc_bench");
                let url = self.postgres.clone().expect("a PostgreSQL URL");
                let conn = sqlx::PgConnection::connect(&url)
                    .await
                    .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
                let last_ids = self.last_ids();
                (
                    table.clone(),
                    Destination::Table {
                        conn,
                        table,
                        last_ids,
                    },
                )
            }
        }
    }

    /// One row: a fresh worker, one connector, measured from its first
    /// record to its last.
    async fn run(
        &mut self,
        pipeline: &Pipeline,
        runner: Runner,
        envelopes: bool,
    ) -> Result<Measured, String> {
        let n = match pipeline.sink {
            Sink::Topic(_) => self.cdc_rows,
            _ => self.n,
        } as u64;
        let (target, mut to) = self.destination(pipeline.sink).await;
        let config = self.config(pipeline, runner, &target, envelopes);
        let name = self.unique("bench");
        let load_before = uptime();
        eprintln!("  uptime before: {load_before}");
        let spawned = Instant::now();
        let worker = match runner {
            Runner::KafkaConnect => Worker::KafkaConnect(
                KafkaConnect::start(&self.install, self.broker.bootstrap()).await,
            ),
            Runner::Sluice | Runner::SluiceSmt => Worker::Sluice(
                SluiceProcess::start(
                    Some(self.broker.bootstrap()),
                    &self.wasm_cache,
                    serde_json::json!({"transforms.library": self.library}),
                )
                .await,
            ),
        };
        let ready = spawned.elapsed();
        tokio::time::sleep(self.idle).await;
        let idle = worker.stats();
        let created = Instant::now();
        let result = async {
            worker.create(&self.http, &name, &config).await?;
            if pipeline.sink == Sink::Topic(CdcPhase::Stream) {
                self.write_changes_once_streaming(&target, n as usize, &worker, &name)
                    .await?;
            }
            let deadline = created + Duration::from_secs(300 + n / 2000);
            let mut checked = Instant::now();
            let mut first: Option<(Instant, u64, ProcStats)> = None;
            let mut profiler: Option<Profiler> = None;
            let end = loop {
                let now = Instant::now();
                if first.is_none() {
                    let arrived = to.arrived().await?;
                    if arrived > 0 {
                        first = Some((now, arrived, worker.stats()));
                        profiler = Profiler::attach(runner, worker.pid(), &name);
                    }
                }
                if first.is_some() && to.complete(n).await? {
                    let end = (Instant::now(), worker.stats());
                    if let Some(p) = profiler.take() {
                        p.stop();
                    }
                    break end;
                }
                if now.duration_since(checked) > Duration::from_secs(2) {
                    checked = now;
                    if let Some(trace) = worker.failure(&self.http, &name).await {
                        return Err(format!("{name} failed: {trace}{}", worker.log_tail()));
                    }
                    if first.is_none() && now.duration_since(created) > Duration::from_secs(120) {
                        return Err(format!(
                            "{name}: no record arrived within 120 s{}",
                            worker.log_tail()
                        ));
                    }
                }
                if now > deadline {
                    return Err(format!(
                        "{name}: {} of {n} records arrived before the deadline",
                        to.total().await.unwrap_or(0)
                    ));
                }
                tokio::time::sleep(Duration::from_millis(match pipeline.sink {
                    Sink::File => 10,
                    Sink::Jdbc | Sink::Topic(_) => 20,
                }))
                .await;
            };
            let mut end = end;
            // The last order of every partition is there: every record
            // should be; a full count says so (and waits if not).
            loop {
                let total = to.total().await?;
                if total == n {
                    break;
                }
                if total > n {
                    return Err(format!("{name}: {total} records for {n} orders"));
                }
                if Instant::now() > deadline {
                    return Err(format!("{name}: {total} of {n} records at the end"));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                end = (Instant::now(), worker.stats());
            }
            let (first_at, first_count, first_stats) = first.expect("a first record");
            let (end_at, end_stats) = end;
            Ok(Measured {
                records: n - first_count,
                seconds: end_at.duration_since(first_at).as_secs_f64(),
                cpu_seconds: end_stats.cpu_seconds - first_stats.cpu_seconds,
                idle_rss_kib: idle.rss_kib,
                peak_rss_kib: end_stats.peak_rss_kib,
                start_to_first: (ready + first_at.duration_since(created)).as_secs_f64(),
                cpu_to_first: first_stats.cpu_seconds,
                load_before: load_before.clone(),
                load_after: String::new(),
                sample: String::new(),
            })
        }
        .await;
        drop(worker);
        let sample = to.sample().await;
        eprintln!("  wrote: {sample}");
        to.clean().await;
        let load_after = uptime();
        eprintln!("  uptime after:  {load_after}");
        result.map(|m| Measured {
            load_after,
            sample,
            ..m
        })
    }
}

impl Bench {
    /// Waits until the CDC connector streams from its slot `table`, then
    /// writes `n` inserts into `table` in transactions of 1000 rows, in
    /// the background (as fast as PostgreSQL takes them: the connector
    /// reads while they are written).
    async fn write_changes_once_streaming(
        &self,
        table: &str,
        n: usize,
        worker: &Worker,
        name: &str,
    ) -> Result<(), String> {
        let url = self.postgres.clone().expect("a PostgreSQL URL");
        let mut conn = sqlx::PgConnection::connect(&url)
            .await
            .map_err(|e| format!("connecting to {url}: {e}"))?;
        let started = Instant::now();
        loop {
            let active: Option<bool> =
                sqlx::query_scalar("SELECT active FROM pg_replication_slots WHERE slot_name = $1")
                    .bind(table)
                    .fetch_optional(&mut conn)
                    .await
                    .map_err(|e| format!("looking for slot {table}: {e}"))?;
            if active == Some(true) {
                break;
            }
            if let Some(trace) = worker.failure(&self.http, name).await {
                return Err(format!("{name} failed: {trace}{}", worker.log_tail()));
            }
            if started.elapsed() > Duration::from_secs(120) {
                return Err(format!(
                    "{name}: its slot {table} was not streaming within 120 s{}",
                    worker.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let table = table.to_string();
        tokio::spawn(async move {
            for from in (1..=n).step_by(1000) {
                let rows = 1000.min(n + 1 - from);
                let insert = cdc_rows_sql(&table, from, rows);
                if let Err(e) = sqlx::query(&insert).execute(&mut conn).await {
                    eprintln!("  writing the changes into {table} failed: {e}");
                    return;
                }
            }
        });
        Ok(())
    }
}

/// `n` rows of a CDC table from id `from`, as one `INSERT` (the rows of
/// `bench/run.sh cdc`'s table).
fn cdc_rows_sql(table: &str, from: usize, n: usize) -> String {
    format!(
        "INSERT INTO {table} SELECT i, 'customer ' || (i % 1000), (i % 100000) / 100.0,
           timestamptz '2026-01-01' + i * interval '1 second', 'note ' || i
         FROM generate_series({from}, {}) i",
        from + n - 1
    )
}

/// `perf record` of a Sluice worker from its first record to its last,
/// when SLUICE_BENCH_KC_PERF names a directory for the profiles (its CPU
/// then counts in the row: a profiling run, not a measurement).
struct Profiler(Child);

impl Profiler {
    fn attach(runner: Runner, pid: u32, name: &str) -> Option<Self> {
        let dir = std::env::var("SLUICE_BENCH_KC_PERF").ok()?;
        if runner == Runner::KafkaConnect {
            return None;
        }
        let out = Path::new(&dir).join(format!("{name}.perf.data"));
        eprintln!("  profiling into {}", out.display());
        Command::new("perf")
            .args(["record", "-F", "499", "-g", "-p", &pid.to_string(), "-o"])
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map(Profiler)
            .map_err(|e| eprintln!("  perf: {e}"))
            .ok()
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// Orders 0..`n` into `topic`, each as `value(i)`, keyed by id, round-robin
/// over its partitions.
async fn produce(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    n: usize,
    value: fn(usize) -> String,
) {
    let producer = order_producer(bootstrap, "20");
    let mut pending = Vec::with_capacity(10_000);
    for i in 0..n {
        pending.push(send_order(&producer, topic, partitions, i, &value(i)));
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

async fn delete_topics(bootstrap: &str, topics: &[&str]) {
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("an admin client");
    let _ = admin.delete_topics(topics, &AdminOptions::new()).await;
}

struct Row {
    pipeline: usize,
    runner: Runner,
    label: String,
    result: Result<Measured, String>,
}

fn print_tables(bench: &Bench, rows: &[Row], date: &str) {
    let n = bench.n;
    println!("\n## Side by side with Apache Kafka Connect\n");
    println!(
        "{date}; {n} orders in one topic of {} partitions (and the same orders as JsonConverter envelopes in a second), Apache Kafka 4.1.1 ({}), one task; Kafka Connect 4.1.1 standalone, JVM options `{}`, `offset.flush.interval.ms` {KC_OFFSET_FLUSH_MS}, consumer and sink settings at their defaults (`max.poll.records` 500, Debezium `batch.size` 500); Sluice standalone {}.\n",
        bench.partitions,
        bench.broker.bootstrap(),
        bench.install.jvm_options(),
        match sluice_extra().as_object() {
            Some(extra) if !extra.is_empty() => format!(
                "with `{}` (SLUICE_BENCH_KC_SLUICE_CONFIG), offsets committed after every batch",
                serde_json::Value::Object(extra.clone())
            ),
            _ => "at its defaults (`batch.max.records` 500, offsets committed after every batch)"
                .to_string(),
        },
    );
    if rows.iter().any(|r| pipeline_sink_is_cdc(r.pipeline)) {
        println!(
            "CDC rows (d): a PostgreSQL table of {} rows (`bigint` key, `text`, `numeric(12,2)`, `timestamptz`, `text`) captured into a topic, by Debezium's PostgreSQL connector ({POSTGRES_SOURCE}, from `scripts/kafka-connect.sh`'s plugin path) on the Kafka Connect worker above and by Sluice's `postgres-cdc` given the same connector config (a slot and publication per row, `pgoutput`, JsonConverter keys and values with schemas). Snapshot: the rows are there before the connector starts (`snapshot.mode=initial`); stream: as many inserts, in transactions of 1000 rows, written once the connector streams (`snapshot.mode=no_data`). Records are counted in the topic by its high watermarks.\n",
            bench.cdc_rows
        );
    }
    println!(
        "| pipeline | worker | records/s | CPU s per 1M records | idle RSS MiB | peak RSS MiB | start to first record s | CPU s to first record |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let pipeline = PIPELINES[r.pipeline].label;
        match &r.result {
            Ok(m) => println!(
                "| {pipeline} | {} | {:.0} | {:.1} | {:.0} | {:.0} | {:.1} | {:.1} |",
                r.label,
                m.records_per_second(),
                m.cpu_per_million(),
                mib(m.idle_rss_kib),
                mib(m.peak_rss_kib),
                m.start_to_first,
                m.cpu_to_first,
            ),
            Err(e) => println!(
                "| {pipeline} | {} | NOT RUN: {} | | | | | |",
                r.label,
                e.lines().next().unwrap_or_default().replace('|', "/")
            ),
        }
    }
    println!(
        "\nRatios Sluice / Kafka Connect on the same pipeline (records per CPU-second: Kafka Connect's CPU per record over Sluice's). Targets: at least 3x Kafka Connect's records per CPU-second, at most 0.10 of its peak memory.\n"
    );
    println!(
        "| pipeline | Sluice row | records/s | records per CPU-second | peak RSS | idle RSS | start to first record | target: 3x per CPU-s | target: 1/10 memory |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---|---|");
    for r in rows.iter().filter(|r| r.runner != Runner::KafkaConnect) {
        let kc = rows
            .iter()
            .find(|k| k.pipeline == r.pipeline && k.runner == Runner::KafkaConnect)
            .and_then(|k| k.result.as_ref().ok());
        let pipeline = PIPELINES[r.pipeline].label;
        let (Some(kc), Ok(s)) = (kc, &r.result) else {
            println!("| {pipeline} | {} | not measured | | | | | | |", r.label);
            continue;
        };
        let per_cpu = kc.cpu_per_million() / s.cpu_per_million();
        let peak = mib(s.peak_rss_kib) / mib(kc.peak_rss_kib);
        println!(
            "| {pipeline} | {} | {:.2}x | {per_cpu:.2}x | {peak:.3} | {:.3} | {:.2} | {} | {} |",
            r.label,
            s.records_per_second() / kc.records_per_second(),
            mib(s.idle_rss_kib) / mib(kc.idle_rss_kib),
            s.start_to_first / kc.start_to_first,
            match pipeline_sink_is_cdc(r.pipeline) {
                true => "-",
                false if per_cpu >= 3.0 => "met",
                false => "NOT met",
            },
            match pipeline_sink_is_cdc(r.pipeline) {
                true => "-",
                false if peak <= 0.10 => "met",
                false => "NOT met",
            },
        );
    }
    println!("\nWhat each row wrote for one order (the file's first line; the row of order 1):\n");
    for r in rows {
        if let Ok(m) = &r.result {
            println!(
                "- {} / {}: `{}`",
                PIPELINES[r.pipeline].label,
                r.label,
                m.sample.chars().take(300).collect::<String>()
            );
        }
    }
    println!("\nLoad (`uptime`) before and after each run:\n");
    for r in rows {
        if let Ok(m) = &r.result {
            println!(
                "- {} / {}: before `{}`; after `{}`",
                PIPELINES[r.pipeline].label, r.label, m.load_before, m.load_after
            );
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a listing
    }
    let broker = BenchBroker::real_from_env().expect(
        "SLUICE_BENCH_KAFKA_BOOTSTRAP: run through `bench/run.sh kafka-connect`, which starts Apache Kafka",
    );
    let wanted: Vec<String> = std::env::var("SLUICE_BENCH_KC_PIPELINES")
        .unwrap_or_else(|_| {
            "file,jdbc,file-transform,jdbc-transform,cdc-snapshot,cdc-stream".into()
        })
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if let Some(unknown) = wanted
        .iter()
        .find(|w| !PIPELINES.iter().any(|p| p.key == w.as_str()))
    {
        panic!("SLUICE_BENCH_KC_PIPELINES: unknown pipeline `{unknown}`");
    }
    let install = KafkaConnectInstall::find();
    let postgres = std::env::var("SLUICE_BENCH_POSTGRES_URL").ok();
    let wasm_module =
        guest_build::build_guest("examples/transforms/rust", "sluice_example_transform.wasm");
    let library = guest_build::build_guest("plugins/transforms", "sluice_transforms.wasm");
    let date = Command::new("date")
        .arg("-u")
        .arg("+%Y-%m-%d %H:%M UTC")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let run_id = std::process::id().to_string();
        let mut bench = Bench {
            n: env_usize("SLUICE_BENCH_KC_RECORDS", 1_000_000),
            cdc_rows: env_usize("SLUICE_BENCH_KC_CDC_ROWS", 200_000),
            partitions: env_usize("SLUICE_BENCH_KC_PARTITIONS", 16) as i32,
            plain_topic: format!("kc-bench-orders-{run_id}"),
            envelope_topic: format!("kc-bench-envelopes-{run_id}"),
            broker,
            postgres,
            install,
            wasm_module,
            library,
            wasm_cache: std::env::temp_dir().join("sluice-bench-wasm-cache"),
            idle: Duration::from_secs(env_usize("SLUICE_BENCH_KC_IDLE_SECONDS", 5) as u64),
            out_dir: tempfile::tempdir_in(
                std::env::var("SLUICE_BENCH_KC_FILE_DIR").unwrap_or_else(|_| "/var/tmp".into()),
            )
            .expect("a directory for the files"),
            http: reqwest::Client::new(),
            run_id,
            next: 0,
        };
        let jdbc_wanted = wanted.iter().any(|w| w.starts_with("jdbc"));
        let cdc_wanted = wanted.iter().any(|w| w.starts_with("cdc"));
        let topics_wanted = wanted.iter().any(|w| !w.starts_with("cdc"));
        if (jdbc_wanted || cdc_wanted) && bench.postgres.is_none() {
            panic!("SLUICE_BENCH_POSTGRES_URL: run through bench/run.sh, which starts PostgreSQL");
        }
        if cdc_wanted && !bench.install.postgres_source {
            panic!("Debezium's PostgreSQL source is not in Kafka Connect's plugins: scripts/kafka-connect.sh did not resolve it");
        }
        if jdbc_wanted && !bench.install.jdbc_sink {
            panic!("Debezium's JDBC sink is not in Kafka Connect's plugins: scripts/kafka-connect.sh did not resolve it");
        }
        let (n, partitions, bootstrap) = (bench.n, bench.partitions, bench.broker.bootstrap().to_string());
        if topics_wanted {
            bench.broker.create_topic(&bench.plain_topic, partitions).await;
            eprintln!("producing {n} orders into {}...", bench.plain_topic);
            produce(&bootstrap, &bench.plain_topic, partitions, n, order_json).await;
        }
        if jdbc_wanted {
            bench.broker.create_topic(&bench.envelope_topic, partitions).await;
            eprintln!("producing {n} order envelopes into {}...", bench.envelope_topic);
            produce(&bootstrap, &bench.envelope_topic, partitions, n, order_envelope).await;
        }

        let mut rows = Vec::new();
        for (i, pipeline) in PIPELINES.iter().enumerate() {
            if !wanted.iter().any(|w| w == pipeline.key) {
                continue;
            }
            let mut runners = vec![
                (Runner::KafkaConnect, kc_label(pipeline)),
                (Runner::Sluice, sluice_label(pipeline, false)),
            ];
            if pipeline.transform {
                runners.push((Runner::SluiceSmt, sluice_label(pipeline, true)));
            }
            for (runner, label) in runners {
                let n = match pipeline.sink {
                    Sink::Topic(_) => bench.cdc_rows,
                    _ => n,
                };
                eprintln!("{} / {label}, {n} records...", pipeline.label);
                let envelopes = pipeline.sink == Sink::Jdbc;
                let mut result = bench.run(pipeline, runner, envelopes).await;
                let mut label = label;
                if let Err(e) = &result {
                    eprintln!("  FAILED: {e}");
                    if runner != Runner::KafkaConnect && envelopes {
                        // Run what works, and say so.
                        let why = e.lines().next().unwrap_or_default().to_string();
                        eprintln!("  again on the plain JSON topic (no schemas)...");
                        result = bench.run(pipeline, runner, false).await;
                        label = format!(
                            "{label}, on the plain JSON topic: with `schemas.enable=true` it failed ({})",
                            why.replace('|', "/").chars().take(160).collect::<String>()
                        );
                    }
                }
                if let Ok(m) = &result {
                    eprintln!(
                        "  {:.0} records/s, {:.1} CPU s per 1M, peak RSS {:.0} MiB",
                        m.records_per_second(),
                        m.cpu_per_million(),
                        mib(m.peak_rss_kib)
                    );
                }
                rows.push(Row {
                    pipeline: i,
                    runner,
                    label,
                    result,
                });
            }
        }
        print_tables(&bench, &rows, &date);
        delete_topics(&bootstrap, &[&bench.plain_topic, &bench.envelope_topic]).await;
    });
}

/// The sink targets (3x per CPU-second, a tenth of the memory) are the
/// sinks'; the CDC rows have none.
fn pipeline_sink_is_cdc(pipeline: usize) -> bool {
    matches!(PIPELINES[pipeline].sink, Sink::Topic(_))
}

fn kc_label(pipeline: &Pipeline) -> String {
    if let Sink::Topic(_) = pipeline.sink {
        return "Kafka Connect + Debezium PostgreSQL source (JsonConverter schemas.enable=true)"
            .into();
    }
    let sink = match pipeline.sink {
        Sink::File => "Kafka Connect FileStreamSink",
        Sink::Jdbc => "Kafka Connect + Debezium JDBC sink (JsonConverter schemas.enable=true)",
        Sink::Topic(_) => unreachable!("labelled above"),
    };
    match (pipeline.transform, pipeline.sink) {
        (false, Sink::File) => format!("{sink} (StringConverter)"),
        (false, Sink::Jdbc) => sink.into(),
        (true, Sink::File) => format!("{sink} (JsonConverter, schemaless) + SMT chain"),
        (true, Sink::Jdbc) => format!("{sink} + SMT chain"),
        (_, Sink::Topic(_)) => unreachable!("labelled above"),
    }
}

fn sluice_label(pipeline: &Pipeline, smt: bool) -> String {
    let sink = match pipeline.sink {
        Sink::File => "Sluice file-sink",
        Sink::Jdbc => "Sluice jdbc-sink (JsonConverter schemas.enable=true)",
        Sink::Topic(_) => "Sluice postgres-cdc (JsonConverter schemas.enable=true)",
    };
    let mut label = match (pipeline.transform, smt) {
        (false, _) => sink.into(),
        (true, false) => format!("{sink} + WASM reference transform"),
        (true, true) => format!("{sink} + SMT chain (standard library)"),
    };
    for (k, v) in sluice_extra().as_object().into_iter().flatten() {
        label = format!("{label}, `{k}={}`", v.as_str().unwrap_or_default());
    }
    label
}

/// SLUICE_BENCH_KC_SLUICE_CONFIG: more keys for Sluice's connectors.
fn sluice_extra() -> serde_json::Value {
    match std::env::var("SLUICE_BENCH_KC_SLUICE_CONFIG") {
        Ok(v) => serde_json::from_str(&v).unwrap_or_else(|e| {
            panic!("SLUICE_BENCH_KC_SLUICE_CONFIG is not a JSON object of strings: {e}")
        }),
        Err(_) => serde_json::json!({}),
    }
}
