//! Every Kafka client is built here, so the safe defaults (acks=all,
//! idempotence, no auto-commit, read_committed, no silent offset reset)
//! cannot be forgotten; plus the embedded development broker and topic
//! creation.

use std::time::Duration;

use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::producer::FutureProducer;

use super::{EmbeddedBroker, LogReaderContext, TaskConsumerContext};
use crate::config::WorkerConfig;

/// Builds every client from the worker config.
#[derive(Clone)]
pub struct KafkaClients {
    bootstrap_servers: String,
    common: Vec<(String, String)>,
    producer_overrides: Vec<(String, String)>,
    pub(super) consumer_overrides: Vec<(String, String)>,
    pub(super) admin_overrides: Vec<(String, String)>,
    pub(super) embedded: Option<EmbeddedBroker>,
    /// The worker's `group.id`: the prefix of its tasks' transactional ids.
    group_id: String,
    offsets_topic: crate::config::OffsetsTopic,
    offset_flush_interval_ms: u64,
    /// Prefix of every consumer's `group.instance.id` (static membership).
    worker_id: String,
}

/// Consumer group defaults for tasks (see [`KafkaClients::consumer`]);
/// Kafka's own defaults (45 s, 3 s) make a slow restart a rebalance.
pub const SESSION_TIMEOUT_MS: u64 = 60_000;
pub const HEARTBEAT_INTERVAL_MS: u64 = 10_000;
/// How long a task's consumer waits to fetch again once its prefetch
/// queue is full (see [`KafkaClients::consumer`]).
const FETCH_QUEUE_BACKOFF_MS: u32 = 20;
/// How many records, and KiB, a task's consumer prefetches at most, and
/// the most one fetch brings (librdkafka fetches once more past a full
/// queue, so this bounds the overshoot: 50 MiB by default).
const QUEUED_MIN_MESSAGES: u32 = 5_000;
const QUEUED_MAX_KBYTES: u32 = 4_096;
const FETCH_MAX_BYTES: u32 = 4 << 20;

/// The floor of `max.poll.interval.ms` (Kafka's default).
const MAX_POLL_INTERVAL_FLOOR_MS: u64 = 300_000;
/// The ceiling of the derived `max.poll.interval.ms` (with infrastructure
/// retries forever, a batch has no bound): a rebalance never waits longer
/// for a member's batch in flight.
const MAX_POLL_INTERVAL_CEILING_MS: u64 = 1_800_000;

impl KafkaClients {
    pub fn new(
        worker: &WorkerConfig,
        bootstrap_servers: String,
        embedded: Option<EmbeddedBroker>,
    ) -> Self {
        let pairs =
            |m: &sluice_sdk::ConfigMap| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        Self {
            bootstrap_servers,
            common: pairs(&worker.client_common),
            producer_overrides: pairs(&worker.producer_overrides),
            consumer_overrides: pairs(&worker.consumer_overrides),
            admin_overrides: pairs(&worker.admin_overrides),
            embedded,
            worker_id: worker.resolved_worker_id(),
            group_id: worker.group_id.clone(),
            offsets_topic: worker.offsets_topic.clone(),
            offset_flush_interval_ms: worker.offset_flush_interval_ms,
        }
    }

    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    pub fn offsets_topic(&self) -> &crate::config::OffsetsTopic {
        &self.offsets_topic
    }

    /// The worker's `offset.flush.interval.ms`.
    pub fn offset_flush_interval(&self) -> Duration {
        Duration::from_millis(self.offset_flush_interval_ms)
    }

    /// The static member id of a task's consumer: stable across restarts
    /// of the task and of the worker, distinct per worker, connector and
    /// task.
    pub fn group_instance_id(&self, connector: &str, task: u32) -> String {
        format!("{}-{connector}-{task}", self.worker_id)
    }

    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap_servers
    }

    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// A consumer in `group` that commits only when told to, with
    /// `settings` and then the worker's `consumer.*` keys.
    pub(super) fn group_consumer_config(
        &self,
        group: &str,
        settings: &[(&str, &str)],
    ) -> ClientConfig {
        let mut c = self.base();
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        for (k, v) in settings {
            c.set(*k, *v);
        }
        for (k, v) in &self.consumer_overrides {
            c.set(k, v);
        }
        c
    }

    pub(super) fn base(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap_servers);
        c.set_log_level(RDKafkaLogLevel::Warning);
        for (k, v) in &self.common {
            c.set(k, v);
        }
        c
    }

    /// An idempotent producer (`acks=all`); `overrides` are the connector's
    /// `producer.override.*` keys.
    pub fn producer(
        &self,
        client_id: &str,
        overrides: &sluice_sdk::ConfigMap,
    ) -> Result<FutureProducer, KafkaError> {
        let mut c = self.base();
        c.set("client.id", client_id)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            // Java clients' partitioner: a key lands where Kafka Connect's
            // producers would put it (and compacted topics keep one
            // partition per key).
            .set("partitioner", "murmur2_random")
            // lz4, not zstd: librdkafka sets up a fresh zstd context for
            // every message set it compresses, and clearing its tables cost
            // a stream ~16,000 instructions a record against lz4's ~2,300
            // (BENCHMARKS.md, "Instructions per record").
            .set("compression.type", "lz4");
        for (k, v) in self
            .producer_overrides
            .iter()
            .map(|(k, v)| (k, v))
            .chain(overrides)
        {
            c.set(k, v);
        }
        c.create()
    }

    /// A transactional producer for an exactly-once task: `transactional.id`
    /// identifies the task across restarts, so starting it fences any
    /// earlier incarnation (see [`super::transaction`]).
    pub fn transactional_producer(
        &self,
        client_id: &str,
        transactional_id: &str,
        overrides: &sluice_sdk::ConfigMap,
    ) -> Result<FutureProducer, KafkaError> {
        let mut with_id = overrides.clone();
        with_id.insert("transactional.id".into(), transactional_id.into());
        self.producer(client_id, &with_id)
    }

    /// A task's consumer: it never auto-commits, reads only committed
    /// records, and never jumps over lost data (see [`TaskConsumerContext`]).
    /// Group defaults for stable membership: cooperative-sticky assignment
    /// (a rebalance moves only the partitions that change owner), static
    /// membership (`group.instance.id` from the worker id, connector and
    /// task, so a restart within `session.timeout.ms` is no rebalance),
    /// `session.timeout.ms=60000`, `heartbeat.interval.ms=10000`, and
    /// `max.poll.interval.ms` covering the longest batch (the rebalance
    /// timeout: a revocation waits for the batch in flight). The worker's
    /// `consumer.*` keys and then the connector's `consumer.override.*` keys
    /// (`overrides`) replace any of them.
    pub fn consumer(
        &self,
        group_id: &str,
        client_id: &str,
        context: TaskConsumerContext,
        overrides: &sluice_sdk::ConfigMap,
    ) -> Result<rdkafka::consumer::StreamConsumer<TaskConsumerContext>, KafkaError> {
        self.consumer_config(
            group_id,
            client_id,
            (&context.connector, context.task),
            context.longest_batch,
            overrides,
        )
        .create_with_context(context)
    }

    /// The settings of [`Self::consumer`], for the task `(connector, task)`.
    fn consumer_config(
        &self,
        group_id: &str,
        client_id: &str,
        (connector, task): (&str, u32),
        longest_batch: Duration,
        overrides: &sluice_sdk::ConfigMap,
    ) -> ClientConfig {
        let mut c = self.base();
        c.set("group.id", group_id)
            .set("client.id", client_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            // Positions without a committed offset are set explicitly on
            // assignment; anything else out of range is data loss, an error.
            .set("auto.offset.reset", "error")
            .set("enable.partition.eof", "false")
            .set("statistics.interval.ms", "5000")
            // Once its prefetch queue holds `queued.min.messages`, librdkafka
            // stops fetching for this long (1 s by default): a task that
            // drains the queue faster than that then waits for data the
            // broker has. A short pause keeps the queue filled.
            .set("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS.to_string())
            // Bounded prefetch: librdkafka's defaults (100000 records, 64 MiB
            // per consumer, fetches of up to 50 MiB) let each task of a
            // backlogged worker buffer a topic's worth; this is several
            // batches ahead, which keeps a task busy, in a fraction of the
            // memory (BENCHMARKS.md, worker memory: 10 tasks peaked at
            // 0.74-0.96 of what 16 MiB and 50 MiB fetches took, at the same
            // rate).
            .set("queued.min.messages", QUEUED_MIN_MESSAGES.to_string())
            .set("queued.max.messages.kbytes", QUEUED_MAX_KBYTES.to_string())
            .set("fetch.max.bytes", FETCH_MAX_BYTES.to_string());
        let settings: Vec<(&String, &String)> = self
            .consumer_overrides
            .iter()
            .map(|(k, v)| (k, v))
            .chain(overrides)
            .collect();
        let overridden = |key: &str| settings.iter().any(|(k, _)| k.as_str() == key);
        // KIP-848's protocol has the broker own assignment and timeouts;
        // librdkafka rejects the classic keys there.
        let classic = settings
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == "group.protocol")
            .is_none_or(|(_, v)| v.as_str() == "classic");
        // Static membership: on by default except on the embedded broker,
        // whose mock does not implement it (a restarted task would wait for
        // its former self's session to expire). A `group.instance.id`
        // setting replaces the worker id in it (tasks must differ), or,
        // empty, turns it off.
        let instance_prefix = settings
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == "group.instance.id")
            .map(|(_, v)| v.as_str());
        match instance_prefix {
            Some("") => {}
            Some(prefix) => {
                c.set("group.instance.id", format!("{prefix}-{connector}-{task}"));
            }
            None if self.is_embedded() => {}
            None => {
                c.set("group.instance.id", self.group_instance_id(connector, task));
            }
        }
        if classic {
            c.set("partition.assignment.strategy", "cooperative-sticky");
        }
        // Not on the embedded broker either: its mock makes every rebalance
        // wait up to the session timeout for members to rejoin.
        if classic && !self.is_embedded() {
            c.set("session.timeout.ms", SESSION_TIMEOUT_MS.to_string())
                .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS.to_string());
        }
        let longest_batch_ms = u64::try_from(longest_batch.as_millis()).unwrap_or(u64::MAX);
        let mut max_poll = longest_batch_ms
            .saturating_add(60_000)
            .clamp(MAX_POLL_INTERVAL_FLOOR_MS, MAX_POLL_INTERVAL_CEILING_MS);
        if classic && overridden("session.timeout.ms") {
            // librdkafka requires max.poll.interval.ms >= session.timeout.ms.
            let session = settings
                .iter()
                .rev()
                .find(|(k, _)| k.as_str() == "session.timeout.ms")
                .and_then(|(_, v)| v.parse::<u64>().ok())
                .unwrap_or(SESSION_TIMEOUT_MS);
            max_poll = max_poll.max(session);
        }
        c.set("max.poll.interval.ms", max_poll.to_string());
        for (k, v) in settings {
            if k.as_str() != "group.instance.id" {
                c.set(k, v);
            }
        }
        c
    }

    /// A plain consumer for tools (DLQ inspect and replay): no
    /// subscription, no auto-commit, committed records only.
    pub fn tool_consumer(
        &self,
        group_id: &str,
    ) -> Result<rdkafka::consumer::BaseConsumer, KafkaError> {
        self.group_consumer_config(
            group_id,
            &[
                ("isolation.level", "read_committed"),
                ("enable.partition.eof", "false"),
            ],
        )
        .create()
    }

    /// A consumer that reads whole topics from the beginning to their end
    /// (reported as partition EOF), committed records only: for the
    /// worker's own compacted topics.
    pub fn log_reader(&self) -> Result<BaseConsumer<LogReaderContext>, KafkaError> {
        self.group_consumer_config(
            "sluice-log-reader",
            &[
                ("isolation.level", "read_committed"),
                ("enable.partition.eof", "true"),
            ],
        )
        .create_with_context(LogReaderContext)
    }

    /// A member of a distributed worker cluster's coordination group
    /// (`sluice distributed`): no offsets kept, cooperative rebalancing,
    /// static membership when `instance_id` is given, and the worker's
    /// `consumer.*` keys (session timeout, heartbeats).
    pub fn coordination_consumer<C: ConsumerContext>(
        &self,
        group_id: &str,
        instance_id: &str,
        context: C,
    ) -> Result<BaseConsumer<C>, KafkaError> {
        let client_id = format!("sluice-worker-{instance_id}");
        self.group_consumer_config(
            group_id,
            &[
                ("client.id", client_id.as_str()),
                ("group.instance.id", instance_id),
                ("auto.offset.reset", "latest"),
                ("enable.partition.eof", "false"),
                ("partition.assignment.strategy", "cooperative-sticky"),
            ],
        )
        .create_with_context(context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clients(worker: &[(&str, &str)]) -> KafkaClients {
        let map = worker
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let config = WorkerConfig::from_map(&map).unwrap();
        KafkaClients::new(&config, "localhost:9092".into(), None)
    }

    fn config(clients: &KafkaClients, overrides: &[(&str, &str)]) -> ClientConfig {
        let overrides = overrides
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        clients.consumer_config(
            "connect-orders",
            "sluice-orders-1",
            ("orders", 1),
            Duration::from_secs(300),
            &overrides,
        )
    }

    #[test]
    fn task_consumers_get_stable_membership_defaults() {
        let c = config(&clients(&[("worker.id", "w1")]), &[]);
        assert_eq!(
            c.get("partition.assignment.strategy"),
            Some("cooperative-sticky")
        );
        assert_eq!(c.get("group.instance.id"), Some("w1-orders-1"));
        assert_eq!(c.get("session.timeout.ms"), Some("60000"));
        assert_eq!(c.get("heartbeat.interval.ms"), Some("10000"));
        // The longest batch plus a minute.
        assert_eq!(c.get("max.poll.interval.ms"), Some("360000"));
        assert_eq!(c.get("enable.auto.commit"), Some("false"));
        // A full prefetch queue pauses fetching briefly, not for librdkafka's 1 s.
        assert_eq!(c.get("fetch.queue.backoff.ms"), Some("20"));
        assert_eq!(c.get("queued.min.messages"), Some("5000"));
        assert_eq!(c.get("queued.max.messages.kbytes"), Some("4096"));
        assert_eq!(c.get("fetch.max.bytes"), Some("4194304"));
    }

    #[test]
    fn worker_and_connector_overrides_replace_the_defaults() {
        let clients = clients(&[
            ("worker.id", "w1"),
            ("consumer.heartbeat.interval.ms", "3000"),
        ]);
        let c = config(
            &clients,
            &[
                ("session.timeout.ms", "900000"),
                ("partition.assignment.strategy", "range"),
            ],
        );
        assert_eq!(c.get("heartbeat.interval.ms"), Some("3000"));
        assert_eq!(c.get("session.timeout.ms"), Some("900000"));
        assert_eq!(c.get("partition.assignment.strategy"), Some("range"));
        // librdkafka wants it at least the session timeout.
        assert_eq!(c.get("max.poll.interval.ms"), Some("900000"));
        let c = config(
            &clients,
            &[
                ("max.poll.interval.ms", "5000"),
                ("fetch.queue.backoff.ms", "500"),
            ],
        );
        assert_eq!(c.get("max.poll.interval.ms"), Some("5000"));
        assert_eq!(c.get("fetch.queue.backoff.ms"), Some("500"));
    }

    #[test]
    fn an_instance_id_setting_replaces_the_worker_id_or_turns_static_membership_off() {
        let c = config(&clients(&[]), &[("group.instance.id", "")]);
        assert_eq!(c.get("group.instance.id"), None);
        let c = config(&clients(&[]), &[("group.instance.id", "blue")]);
        assert_eq!(c.get("group.instance.id"), Some("blue-orders-1"));
    }

    #[test]
    fn the_consumer_protocol_gets_no_classic_keys() {
        let c = config(&clients(&[]), &[("group.protocol", "consumer")]);
        for key in [
            "partition.assignment.strategy",
            "session.timeout.ms",
            "heartbeat.interval.ms",
        ] {
            assert_eq!(c.get(key), None, "{key}");
        }
        assert!(c.get("group.instance.id").is_some());
    }

    #[test]
    fn the_worker_id_defaults_to_host_and_rest_port() {
        let config = WorkerConfig::from_map(
            &[("listeners".to_string(), "http://0.0.0.0:8090".to_string())]
                .into_iter()
                .collect(),
        )
        .unwrap();
        let id = config.resolved_worker_id();
        assert!(id.ends_with(":8090"), "{id}");
        assert!(!id.starts_with("0.0.0.0"), "{id}");
        assert_eq!(id, config.resolved_worker_id(), "stable");
    }
}
