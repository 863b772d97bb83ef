//! Checks against a real Apache Kafka: what exactly-once and static
//! membership need from a broker that enforces them. librdkafka's mock
//! cluster (the embedded default, and the broker of the other tests)
//! accepts the transactional API but enforces nothing, so every guarantee
//! is shown here, asserted on what a read_committed consumer sees, record by
//! record.
//!
//! The broker is the one `scripts/kafka.sh start` runs (KRaft, on loopback;
//! `scripts/test.sh` starts it, and a test started by hand starts it too);
//! the failover checks start a three-broker cluster with
//! `scripts/kafka.sh start --brokers 3`. `SLUICE_TEST_KAFKA_BOOTSTRAP` names
//! another cluster instead (client settings such as SASL may be added as
//! `SLUICE_TEST_KAFKA_<KEY>`, e.g. `SLUICE_TEST_KAFKA_SECURITY_PROTOCOL`).

mod bounce;
mod cdc;
mod compat_rest;
mod debezium;
mod jdbc_sink;
mod membership;
mod replay;
mod schema_registry;
mod sink_offsets;
mod split_brain;
mod stability;
mod transactions;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::OwnedMessage;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};
use sluice_runtime::config::{WorkerConfig, string_map_from_json};
use sluice_runtime::kafka::KafkaClients;

use crate::fixtures;

/// A Kafka cluster of `scripts/kafka.sh`: its bootstrap servers and, to
/// kill and restart brokers or read their logs, its size.
pub struct Cluster {
    pub bootstrap: String,
    brokers: u32,
}

impl Cluster {
    /// SIGKILLs broker `node` (1-based).
    pub fn kill(&self, node: u32) {
        kafka_sh(&[
            "kill",
            &node.to_string(),
            "--brokers",
            &self.brokers.to_string(),
        ]);
    }

    /// Starts every broker that is not running and waits for them.
    pub fn start_again(&self) {
        kafka_sh(&["start", "--brokers", &self.brokers.to_string()]);
    }

    /// The INFO log of broker `node`: the group coordinator's decisions.
    pub fn server_log(&self, node: u32) -> String {
        let dir = std::env::var("SLUICE_KAFKA_DIR").unwrap_or_else(|_| "/tmp/sluice-kafka".into());
        let path = PathBuf::from(format!("{dir}-{}/node-{node}/server.log", self.brokers));
        std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (this check reads the broker's log: it needs the broker of scripts/kafka.sh)",
                path.display()
            )
        })
    }
}

fn kafka_sh(args: &[&str]) -> String {
    let out = Command::new(fixtures::repo_root().join("scripts/kafka.sh"))
        .args(args)
        .output()
        .expect("running scripts/kafka.sh");
    assert!(
        out.status.success(),
        "scripts/kafka.sh {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn started(brokers: u32) -> Cluster {
    let out = kafka_sh(&["start", "--brokers", &brokers.to_string()]);
    let bootstrap = out
        .lines()
        .find_map(|l| l.strip_prefix("export ")?.split_once('=').map(|(_, v)| v))
        .unwrap_or_else(|| panic!("scripts/kafka.sh printed no export line: {out}"))
        .to_string();
    Cluster { bootstrap, brokers }
}

/// The single-broker cluster (or the one `SLUICE_TEST_KAFKA_BOOTSTRAP` names).
pub fn broker() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match std::env::var("SLUICE_TEST_KAFKA_BOOTSTRAP") {
        Ok(bootstrap) if !bootstrap.is_empty() => Cluster {
            bootstrap,
            brokers: 1,
        },
        _ => started(1),
    })
}

/// The three-broker cluster (replication factor 3, min.insync.replicas 2),
/// for checks that kill a broker.
pub fn cluster3() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match std::env::var("SLUICE_TEST_KAFKA3_BOOTSTRAP") {
        Ok(bootstrap) if !bootstrap.is_empty() => Cluster {
            bootstrap,
            brokers: 3,
        },
        _ => started(3),
    })
}

/// Client settings for the test's own clients: `SLUICE_TEST_KAFKA_<KEY>`.
fn client_settings() -> Vec<(String, String)> {
    std::env::vars()
        .filter_map(|(k, v)| {
            let key = k.strip_prefix("SLUICE_TEST_KAFKA_")?;
            (key != "BOOTSTRAP").then(|| (key.to_lowercase().replace('_', "."), v))
        })
        .collect()
}

fn client_config(bootstrap: &str) -> rdkafka::ClientConfig {
    let mut c = rdkafka::ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    for (k, v) in client_settings() {
        c.set(k, v);
    }
    c
}

/// Sluice's own clients for the single broker.
pub fn clients() -> KafkaClients {
    let bootstrap = broker().bootstrap.clone();
    let mut settings = serde_json::Map::new();
    for (k, v) in client_settings() {
        settings.insert(k, v.into());
    }
    settings.insert("bootstrap.servers".into(), bootstrap.clone().into());
    let worker = WorkerConfig::from_map(&string_map_from_json(&settings.into()).unwrap()).unwrap();
    KafkaClients::new(&worker, bootstrap, None)
}

/// The generations the broker's coordinator stabilized for `group`, and how
/// many rebalances it began for it, from its log.
pub fn group_history(cluster: &Cluster, group: &str) -> (Vec<u64>, usize) {
    let log = cluster.server_log(1);
    let needle = format!("group {group} ");
    let mut generations = Vec::new();
    let mut rebalances = 0;
    for line in log.lines().filter(|l| l.contains(&needle)) {
        if line.contains("Preparing to rebalance") {
            rebalances += 1;
        }
        if let Some(rest) = line.split("Stabilized group ").nth(1)
            && let Some(generation) = rest
                .split_whitespace()
                .skip_while(|w| *w != "generation")
                .nth(1)
        {
            generations.push(generation.trim_end_matches(['.', ',']).parse().unwrap());
        }
    }
    (generations, rebalances)
}

/// [`group_history`] once `group` is stable: every rebalance begun has
/// stabilized, and nothing changed for a second.
pub async fn settled_group_history(cluster: &Cluster, group: &str) -> (Vec<u64>, usize) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = group_history(cluster, group);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = group_history(cluster, group);
        if now == last && now.0.len() == now.1 && !now.0.is_empty() {
            return now;
        }
        assert!(
            Instant::now() < deadline,
            "{group} did not settle in 90 s (stable generations, rebalances begun): {now:?}"
        );
        last = now;
    }
}

/// A name no earlier run used: the brokers keep their data between runs, and
/// a transactional id or a group from an earlier run must not interfere.
pub fn unique(what: &str) -> String {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    format!(
        "sluice-{what}-{}-{}-{}",
        std::process::id(),
        chrono::Utc::now().timestamp_millis(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

pub async fn create_topic(bootstrap: &str, name: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap).create().unwrap();
    let results = admin
        .create_topics(
            &[NewTopic::new(name, partitions, TopicReplication::Fixed(-1))],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .unwrap();
    for r in results {
        r.unwrap_or_else(|(topic, e)| panic!("creating {topic}: {e}"));
    }
}

/// Writes `per_partition` records to each of `partitions` partitions:
/// value `{"p": partition, "seq": n}` (n from 0 in each partition), key
/// `p<partition>-k<n % 64>` so that keys repeat.
pub async fn produce_numbered(bootstrap: &str, topic: &str, partitions: i32, per_partition: u64) {
    produce_numbered_paced(
        bootstrap,
        topic,
        partitions,
        0..per_partition,
        5000,
        Duration::ZERO,
    )
    .await;
}

/// [`produce_numbered`]'s records numbered `seqs` in each partition, in
/// steps of `step` numbers, each step delivered before a `pause`.
pub async fn produce_numbered_paced(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    seqs: std::ops::Range<u64>,
    step: usize,
    pause: Duration,
) {
    let producer = numbered_producer(bootstrap);
    for chunk in seqs.collect::<Vec<_>>().chunks(step) {
        send_numbered(&producer, topic, partitions, chunk).await;
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
}

/// [`produce_numbered`]'s records from number `from` on, `step` numbers a
/// partition every `pause`, until `stop` is set (checked after each step).
/// Returns the first number not written: input that flows for as long as
/// the test needs it to, however slow the machine.
pub async fn produce_numbered_until(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    from: u64,
    step: u64,
    pause: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> u64 {
    let producer = numbered_producer(bootstrap);
    let mut next = from;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let chunk: Vec<u64> = (next..next + step).collect();
        send_numbered(&producer, topic, partitions, &chunk).await;
        next += step;
        tokio::time::sleep(pause).await;
    }
    next
}

fn numbered_producer(bootstrap: &str) -> FutureProducer {
    client_config(bootstrap)
        .set("linger.ms", "20")
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .unwrap()
}

/// Sends numbers `chunk` to every partition and waits for their delivery.
async fn send_numbered(producer: &FutureProducer, topic: &str, partitions: i32, chunk: &[u64]) {
    let mut sends = Vec::new();
    for p in 0..partitions {
        for &seq in chunk {
            let key = format!("p{p}-k{}", seq % 64);
            let value = json!({"p": p, "seq": seq}).to_string();
            let record = FutureRecord::to(topic)
                .partition(p)
                .key(&key)
                .payload(&value);
            let delivery = producer.send_result(record).map_err(|(e, _)| e);
            sends.push(delivery.expect("queueing the input"));
        }
    }
    for r in futures::future::join_all(sends).await {
        let delivered = r.expect("a delivery report");
        delivered.map_err(|(e, _)| e).expect("producing the input");
    }
}

/// Every committed record of `topic`, read with `isolation.level=read_committed`
/// from the beginning to each partition's last stable offset.
pub fn read_committed(bootstrap: &str, topic: &str) -> Vec<OwnedMessage> {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", unique("reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    let metadata = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .unwrap();
    let mut tpl = rdkafka::TopicPartitionList::new();
    let partitions: Vec<i32> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| p.id())
        .collect();
    assert!(!partitions.is_empty(), "{topic} has no partitions");
    for p in &partitions {
        tpl.add_partition_offset(topic, *p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut open: std::collections::BTreeSet<i32> = partitions.into_iter().collect();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !open.is_empty() {
        assert!(
            Instant::now() < deadline,
            "reading {topic} to its end stalled (partitions {open:?} open)"
        );
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => out.push(m.detach()),
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            // A broker that a failover check killed: the client reconnects
            // to the others; anything lasting ends at the deadline.
            Some(Err(e)) => eprintln!("reading {topic}: {e}"),
            None => {}
        }
    }
    out
}

/// The sum of a topic's high watermarks: how far writers got, committed or
/// not (a cheap progress signal; the verdict is always read_committed).
pub fn high_watermarks(bootstrap: &str, topic: &str) -> i64 {
    let consumer: BaseConsumer = client_config(bootstrap)
        .set("group.id", unique("watermarks"))
        .create()
        .unwrap();
    let Ok(metadata) = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)) else {
        return 0;
    };
    metadata.topics()[0]
        .partitions()
        .iter()
        .filter_map(|p| {
            consumer
                .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
                .ok()
        })
        .map(|(_, high)| high)
        .sum()
}

/// Checks a copy of `produce_numbered`'s records read with read_committed:
/// every input record exactly once, and within each output partition the
/// records of each input partition in their input order.
pub fn assert_exactly_once_in_order(
    output: &[OwnedMessage],
    partitions: i32,
    per_partition: u64,
    context: &str,
) {
    let mut seen: BTreeMap<(i64, i64), u32> = BTreeMap::new();
    let mut last: BTreeMap<(i32, i64), i64> = BTreeMap::new();
    let mut out_of_order = Vec::new();
    for m in output {
        let value: Value = serde_json::from_slice(m.payload().unwrap_or_default())
            .unwrap_or_else(|e| panic!("an output record is not JSON ({e}): {m:?}"));
        let (p, seq) = (value["p"].as_i64().unwrap(), value["seq"].as_i64().unwrap());
        *seen.entry((p, seq)).or_default() += 1;
        if let Some(previous) = last.insert((m.partition(), p), seq)
            && previous >= seq
        {
            out_of_order.push((m.partition(), p, previous, seq));
        }
    }
    let duplicates: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).take(10).collect();
    let missing: Vec<_> = (0..partitions as i64)
        .flat_map(|p| (0..per_partition as i64).map(move |s| (p, s)))
        .filter(|k| !seen.contains_key(k))
        .take(10)
        .collect();
    let expected = partitions as usize * per_partition as usize;
    assert!(
        duplicates.is_empty() && missing.is_empty() && out_of_order.is_empty(),
        "{context}: {} distinct of {expected} input records, {} read; \
         duplicated (input partition, seq): {duplicates:?}; missing: {missing:?}; \
         out of order (output partition, input partition, before, after): {:?}",
        seen.len(),
        output.len(),
        &out_of_order[..out_of_order.len().min(10)]
    );
}

/// A standalone worker's config file for the real broker: its own REST port
/// and, so that runs never share them, its own group and offsets topic.
pub fn write_worker(dir: &Path, bootstrap: &str, name: &str, extra: Value) -> PathBuf {
    let mut config = json!({
        "bootstrap.servers": bootstrap,
        "listeners": format!("http://127.0.0.1:{}", fixtures::free_port()),
        "group.id": unique("worker"),
        "offset.storage.topic": unique("offsets"),
        "wasm.cache.dir": fixtures::wasm_cache_dir().display().to_string(),
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        config[k] = v.clone();
    }
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, config.to_string()).unwrap();
    file
}

pub fn write_connector(dir: &Path, name: &str, config: Value) -> PathBuf {
    let file = dir.join(format!("{name}.connector.json"));
    std::fs::write(&file, json!({"name": name, "config": config}).to_string()).unwrap();
    file
}

/// The REST base URL of a worker file written by `write_worker`.
pub fn worker_url(worker_file: &Path) -> String {
    let config: Value = serde_json::from_slice(&std::fs::read(worker_file).unwrap()).unwrap();
    config["listeners"].as_str().unwrap().to_string()
}

/// `GET base/path` as JSON, or `None` while the worker does not answer 200.
pub async fn get_json(base: &str, path: &str) -> Option<Value> {
    crate::distributed::get_json(&reqwest::Client::new(), &format!("{base}{path}")).await
}

/// The sum of a counter's samples in a worker's `/metrics` whose labels
/// contain every one of `labels` (e.g. `outcome="fenced"`).
pub async fn metric_sum(base: &str, name: &str, labels: &[&str]) -> f64 {
    let Ok(r) = reqwest::get(format!("{base}/metrics")).await else {
        return 0.0;
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
