//! Every Kafka client is built here, so the safe defaults (acks=all,
//! idempotence, no auto-commit, read_committed, no silent offset reset)
//! cannot be forgotten; plus the embedded development broker and topic
//! creation.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::FutureProducer;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::{mpsc, oneshot};

use crate::config::WorkerConfig;

/// Builds every client from the worker config.
#[derive(Clone)]
pub struct KafkaClients {
    bootstrap_servers: String,
    common: Vec<(String, String)>,
    producer_overrides: Vec<(String, String)>,
    consumer_overrides: Vec<(String, String)>,
    admin_overrides: Vec<(String, String)>,
    embedded: Option<EmbeddedBroker>,
    /// The worker's `group.id`: the prefix of its tasks' transactional ids.
    group_id: String,
    offsets_topic: crate::offsets::OffsetsTopic,
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
/// How many records, and KiB, a task's consumer prefetches at most.
const QUEUED_MIN_MESSAGES: u32 = 20_000;
const QUEUED_MAX_KBYTES: u32 = 16_384;

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

    pub fn offsets_topic(&self) -> &crate::offsets::OffsetsTopic {
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

    fn base(&self) -> ClientConfig {
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
            .set("compression.type", "zstd");
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
    /// earlier incarnation (see [`crate::transaction`]).
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
    /// records, and never jumps over lost data (see [`SafeConsumerContext`]).
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
        context: SafeConsumerContext,
        overrides: &sluice_sdk::ConfigMap,
    ) -> Result<rdkafka::consumer::StreamConsumer<SafeConsumerContext>, KafkaError> {
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
            // per consumer) let each task of a backlogged worker buffer a
            // topic's worth; this is several batches ahead, which keeps a
            // task busy, in a fraction of the memory.
            .set("queued.min.messages", QUEUED_MIN_MESSAGES.to_string())
            .set("queued.max.messages.kbytes", QUEUED_MAX_KBYTES.to_string());
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
        let mut c = self.base();
        c.set("group.id", group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "false");
        for (k, v) in &self.consumer_overrides {
            c.set(k, v);
        }
        c.create()
    }

    /// A consumer that reads whole topics from the beginning to their end
    /// (reported as partition EOF), committed records only: for the
    /// worker's own compacted topics.
    pub fn log_reader(&self) -> Result<BaseConsumer<LogReaderContext>, KafkaError> {
        let mut c = self.base();
        c.set("group.id", "sluice-log-reader")
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "true");
        for (k, v) in &self.consumer_overrides {
            c.set(k, v);
        }
        c.create_with_context(LogReaderContext)
    }

    /// A consumer group's committed offset for every partition of `topics`
    /// (None: nothing committed). Blocking.
    pub fn group_offsets(
        &self,
        group: &str,
        topics: &[String],
    ) -> anyhow::Result<Vec<(String, i32, Option<i64>)>> {
        use rdkafka::consumer::Consumer;
        let consumer = self.tool_consumer(group)?;
        let mut tpl = TopicPartitionList::new();
        for topic in topics {
            let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10))?;
            for t in metadata.topics().iter().filter(|t| t.name() == topic) {
                for p in t.partitions() {
                    tpl.add_partition(topic, p.id());
                }
            }
        }
        let committed = consumer.committed_offsets(tpl, Duration::from_secs(10))?;
        Ok(committed
            .elements()
            .iter()
            .map(|e| {
                let offset = match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                };
                (e.topic().to_string(), e.partition(), offset)
            })
            .collect())
    }

    /// Commits offsets for a stopped connector's group. It joins the group
    /// (with the sinks' protocol), waits until it owns every partition (no
    /// task competes while the connector is stopped), commits as a member,
    /// and leaves: brokers accept that whatever state the group was left
    /// in. `None` means the beginning of the partition. Blocking.
    pub fn set_group_offsets(
        &self,
        group: &str,
        offsets: &[(String, i32, Option<i64>)],
    ) -> anyhow::Result<()> {
        use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
        if offsets.is_empty() {
            return Ok(());
        }
        let mut c = self.base();
        c.set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("auto.offset.reset", "earliest");
        for (k, v) in &self.consumer_overrides {
            c.set(k, v);
        }
        let consumer: BaseConsumer = c.create()?;
        let mut tpl = TopicPartitionList::new();
        for (topic, partition, offset) in offsets {
            let at = match offset {
                Some(o) => *o,
                None => {
                    consumer
                        .fetch_watermarks(topic, *partition, Duration::from_secs(10))?
                        .0
                }
            };
            tpl.add_partition_offset(topic, *partition, Offset::Offset(at))?;
        }
        let mut topics: Vec<&str> = offsets.iter().map(|(t, _, _)| t.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        consumer.subscribe(&topics)?;
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        loop {
            // Serve the group protocol; records read here are not used or
            // committed.
            let _ = consumer.poll(Duration::from_millis(200));
            let owned = consumer.assignment()?;
            let all = offsets.iter().all(|(t, p, _)| {
                owned
                    .elements()
                    .iter()
                    .any(|e| e.topic() == t && e.partition() == *p)
            });
            if all {
                break;
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!(
                    "could not take over the partitions of group `{group}`: is a task of the connector still running?"
                );
            }
        }
        consumer
            .commit(&tpl, CommitMode::Sync)
            .map_err(|e| anyhow::anyhow!("the consumer group did not accept the offsets: {e}"))?;
        consumer.unsubscribe();
        Ok(())
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
        let mut c = self.base();
        c.set("group.id", group_id)
            .set("client.id", format!("sluice-worker-{instance_id}"))
            .set("group.instance.id", instance_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "latest")
            .set("enable.partition.eof", "false")
            .set("partition.assignment.strategy", "cooperative-sticky");
        for (k, v) in &self.consumer_overrides {
            c.set(k, v);
        }
        c.create_with_context(context)
    }

    /// Creates a worker's internal topic if it is missing; `compact` ones
    /// keep the latest record of every key forever (`cleanup.policy=compact`),
    /// as Kafka Connect's config and status topics do. Returns its partition
    /// count.
    pub async fn ensure_internal_topic(
        &self,
        topic: &str,
        partitions: i32,
        replication: i32,
        compact: bool,
    ) -> anyhow::Result<i32> {
        let count = |clients: &Self| -> anyhow::Result<Option<i32>> {
            let consumer = clients.tool_consumer("sluice-metadata")?;
            let metadata = tokio::task::block_in_place(|| {
                consumer.fetch_metadata(Some(topic), Duration::from_secs(30))
            })?;
            Ok(metadata
                .topics()
                .iter()
                .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.partitions().len() as i32))
        };
        if let Some(n) = count(self)? {
            return Ok(n);
        }
        if let Some(embedded) = &self.embedded {
            embedded.create_topic(topic, partitions).await?;
            return Ok(partitions);
        }
        let mut c = self.base();
        for (k, v) in &self.admin_overrides {
            c.set(k, v);
        }
        let admin: AdminClient<DefaultClientContext> = c.create()?;
        let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(replication));
        if compact {
            new = new.set("cleanup.policy", "compact");
        }
        let results = admin
            .create_topics(
                [&new],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await?;
        for r in results {
            match r {
                Ok(topic) => tracing::info!(topic, partitions, compact, "created internal topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => anyhow::bail!("creating topic `{topic}`: {code}"),
            }
        }
        Ok(count(self)?.unwrap_or(partitions))
    }

    /// Creates each topic that does not exist yet.
    pub async fn ensure_topics(
        &self,
        topics: &[String],
        partitions: i32,
        replication: i32,
    ) -> anyhow::Result<()> {
        if topics.is_empty() {
            return Ok(());
        }
        if let Some(embedded) = &self.embedded {
            for t in topics {
                embedded.create_topic(t, partitions).await?;
            }
            return Ok(());
        }
        let mut c = self.base();
        for (k, v) in &self.admin_overrides {
            c.set(k, v);
        }
        let admin: AdminClient<DefaultClientContext> = c.create()?;
        // Only what is missing is created: that needs no CREATE permission
        // for existing topics (and no CreateTopics support at all).
        let existing: Vec<String> = {
            let client = admin.inner();
            let metadata = tokio::task::block_in_place(|| {
                client.fetch_metadata(None, Duration::from_secs(30))
            })?;
            metadata
                .topics()
                .iter()
                .filter(|t| t.error().is_none() && !t.partitions().is_empty())
                .map(|t| t.name().to_string())
                .collect()
        };
        let missing: Vec<&String> = topics.iter().filter(|t| !existing.contains(t)).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let new: Vec<NewTopic<'_>> = missing
            .iter()
            .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(replication)))
            .collect();
        let results = admin
            .create_topics(
                &new,
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
            )
            .await?;
        for r in results {
            match r {
                Ok(topic) => tracing::info!(topic, partitions, "created topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => anyhow::bail!("creating topic `{topic}`: {code}"),
            }
        }
        Ok(())
    }
}

/// librdkafka's mock cluster, owned by a thread of its own (it is not
/// `Send`), for development: real Kafka protocol on a loopback port, nothing
/// kept across restarts.
#[derive(Clone)]
pub struct EmbeddedBroker {
    bootstrap: String,
    commands: mpsc::UnboundedSender<(BrokerCommand, oneshot::Sender<anyhow::Result<()>>)>,
}

/// What the thread that owns the mock cluster is asked to do.
enum BrokerCommand {
    CreateTopic(String, i32),
    /// Fail the next requests of one kind with these errors, in order
    /// (fault injection, for testing error handling against the real
    /// protocol).
    FailRequests(rdkafka::types::RDKafkaApiKey, Vec<RDKafkaRespErr>),
    /// Take the broker down (`false`) or bring it back up (`true`).
    SetBrokerUp(bool),
}

/// Data beyond about this much per partition is silently dropped by the mock.
pub const EMBEDDED_PARTITION_LIMIT_BYTES: u64 = 5 * 1024 * 1024;

impl EmbeddedBroker {
    pub fn start() -> anyhow::Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (tx, mut rx) =
            mpsc::unbounded_channel::<(BrokerCommand, oneshot::Sender<anyhow::Result<()>>)>();
        std::thread::Builder::new()
            .name("embedded-broker".into())
            .spawn(move || {
                let cluster = match MockCluster::new(1) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx
                            .send(Err(anyhow::anyhow!("starting the embedded broker: {e}")));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(cluster.bootstrap_servers()));
                // Serve commands until every handle is dropped.
                while let Some((command, reply)) = rx.blocking_recv() {
                    let result = match command {
                        BrokerCommand::CreateTopic(topic, partitions) => {
                            match cluster.create_topic(&topic, partitions, 1) {
                                Ok(())
                                | Err(KafkaError::MockCluster(
                                    RDKafkaErrorCode::TopicAlreadyExists,
                                )) => Ok(()),
                                Err(e) => Err(anyhow::anyhow!(
                                    "creating topic `{topic}` on the embedded broker: {e}"
                                )),
                            }
                        }
                        BrokerCommand::FailRequests(api, errors) => {
                            cluster.request_errors(api, &errors);
                            Ok(())
                        }
                        BrokerCommand::SetBrokerUp(up) => {
                            let result = if up {
                                cluster.broker_up(1)
                            } else {
                                cluster.broker_down(1)
                            };
                            result.map_err(|e| anyhow::anyhow!("changing the embedded broker: {e}"))
                        }
                    };
                    let _ = reply.send(result);
                }
            })?;
        let bootstrap = ready_rx.recv()??;
        Ok(Self {
            bootstrap,
            commands: tx,
        })
    }

    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    pub async fn create_topic(&self, topic: &str, partitions: i32) -> anyhow::Result<()> {
        self.command(BrokerCommand::CreateTopic(topic.to_string(), partitions))
            .await
    }

    /// Makes the next requests of kind `api` fail with `errors`, one per
    /// request, in order (librdkafka's mock cluster fault injection).
    pub async fn fail_requests(
        &self,
        api: rdkafka::types::RDKafkaApiKey,
        errors: Vec<RDKafkaRespErr>,
    ) -> anyhow::Result<()> {
        self.command(BrokerCommand::FailRequests(api, errors)).await
    }

    /// Takes the broker down (`false`: every connection fails) or brings
    /// it back (`true`), for testing outages against the real protocol.
    pub async fn set_up(&self, up: bool) -> anyhow::Result<()> {
        self.command(BrokerCommand::SetBrokerUp(up)).await
    }

    async fn command(&self, command: BrokerCommand) -> anyhow::Result<()> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send((command, tx))
            .map_err(|_| anyhow::anyhow!("the embedded broker has stopped"))?;
        rx.await
            .map_err(|_| anyhow::anyhow!("the embedded broker has stopped"))?
    }
}

/// The log reader's context: reaching the end of a partition is how it
/// knows it has read everything, not an error to log. (A real broker's
/// end of partition reaches this callback as a global error, the mock's as
/// a partition's.)
pub struct LogReaderContext;

impl ClientContext for LogReaderContext {
    fn error(&self, error: KafkaError, reason: &str) {
        let end_of_partition = matches!(
            error,
            KafkaError::PartitionEOF(_)
                | KafkaError::Global(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
        );
        if !end_of_partition {
            tracing::error!(error = %error, reason, "librdkafka error while reading an internal topic");
        }
    }
}

impl ConsumerContext for LogReaderContext {}

/// What the consumer reports to its task from librdkafka's threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsumerEvent {
    Assigned(Vec<(String, i32)>),
    Revoked(Vec<(String, i32)>),
}

/// Sets explicit start positions on assignment (the committed offset, or the
/// beginning for a partition the group has never committed), so that
/// `auto.offset.reset` only ever fires for an out-of-range offset, which
/// means data was lost and is reported, never skipped.
pub struct SafeConsumerContext {
    pub events: tokio::sync::mpsc::UnboundedSender<ConsumerEvent>,
    pub connector: Arc<str>,
    pub task: u32,
    pub metrics: crate::metrics::Metrics,
    pub assigned: std::sync::Mutex<std::collections::BTreeSet<(String, i32)>>,
    /// Exactly-once sinks: new partitions stay paused until the task has
    /// moved them to the offsets stored with its data.
    pub pause_assigned: bool,
    /// The longest a batch may take to be written (with its retries):
    /// `max.poll.interval.ms`, the rebalance timeout, covers it.
    pub longest_batch: Duration,
    /// Revocations wait while the task holds records (see
    /// [`SafeConsumerContext::hold_revocations`]).
    revocations: std::sync::Mutex<Revocations>,
    /// Set when the task stops: what the consumer releases then is no
    /// rebalance.
    closing: std::sync::atomic::AtomicBool,
}

/// Partitions whose revocation waits for the batch in flight.
#[derive(Default)]
struct Revocations {
    holding: bool,
    deferred: Vec<(String, i32)>,
}

impl ClientContext for SafeConsumerContext {
    /// librdkafka's statistics carry each partition's lag behind the
    /// committed offset (`statistics.interval.ms`).
    fn stats(&self, statistics: rdkafka::Statistics) {
        let assigned = self.assigned.lock().expect("assigned lock");
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                if *partition < 0 || !assigned.contains(&(topic.clone(), *partition)) {
                    continue;
                }
                let lag = if p.consumer_lag >= 0 {
                    p.consumer_lag
                } else if p.committed_offset < 0 && p.hi_offset >= 0 {
                    // Nothing committed yet: everything up to the end is lag.
                    p.hi_offset - p.lo_offset.max(0)
                } else {
                    continue;
                };
                self.metrics
                    .consumer_lag
                    .with_label_values(&[
                        self.connector.as_ref(),
                        topic.as_str(),
                        &partition.to_string(),
                    ])
                    .set(lag);
            }
        }
    }
}

impl ConsumerContext for SafeConsumerContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            rdkafka::consumer::RebalanceProtocol::Cooperative
        );
        let partitions: Vec<(String, i32)> = tpl
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.set_start_positions(consumer, tpl);
                let result = if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                };
                if let Err(e) = result {
                    tracing::error!(connector = %self.connector, error = %e, "assigning partitions failed");
                }
                if self.pause_assigned
                    && let Err(e) = consumer.pause(tpl)
                {
                    tracing::error!(connector = %self.connector, error = %e, "pausing new partitions failed");
                }
                if !partitions.is_empty() {
                    tracing::info!(connector = %self.connector, task = self.task, gained = ?partitions, "rebalance: partitions assigned");
                }
                self.record_rebalance(&partitions, true, true);
                let _ = self.events.send(ConsumerEvent::Assigned(partitions));
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                let closing = self.closing.load(std::sync::atomic::Ordering::SeqCst);
                if cooperative && !closing {
                    let mut revocations = self.revocations.lock().expect("revocations lock");
                    if revocations.holding {
                        // The records in flight are written and committed
                        // before the partitions go (`release_revocations`);
                        // the rebalance waits for that, up to the rebalance
                        // timeout (max.poll.interval.ms).
                        tracing::info!(connector = %self.connector, task = self.task, lost = ?partitions, "rebalance: revocation waits for the batch in flight");
                        revocations.deferred.extend(partitions);
                        return;
                    }
                }
                let result = if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                };
                if let Err(e) = result {
                    tracing::error!(connector = %self.connector, error = %e, "revoking partitions failed");
                }
                self.revoked(partitions, closing);
            }
            other => {
                tracing::error!(connector = %self.connector, error = ?other, "rebalance error");
                let _ = consumer.unassign();
            }
        }
    }
}

impl SafeConsumerContext {
    pub fn new(
        events: tokio::sync::mpsc::UnboundedSender<ConsumerEvent>,
        connector: Arc<str>,
        task: u32,
        metrics: crate::metrics::Metrics,
    ) -> Self {
        Self {
            events,
            connector,
            task,
            metrics,
            assigned: Default::default(),
            pause_assigned: false,
            longest_batch: Duration::ZERO,
            revocations: Default::default(),
            closing: Default::default(),
        }
    }

    /// `max.poll.interval.ms` is sized to cover a batch this long.
    pub fn with_longest_batch(mut self, longest: Duration) -> Self {
        self.longest_batch = longest;
        self
    }

    /// From now on the task holds records not yet committed: a revocation
    /// arriving meanwhile is deferred until [`Self::release_revocations`].
    pub fn hold_revocations(&self) {
        self.revocations.lock().expect("revocations lock").holding = true;
    }

    /// The records held are committed (or will be read again): partitions
    /// whose revocation waited are released now. Blocking (it talks to the
    /// group coordinator through librdkafka).
    pub fn release_revocations(&self, consumer: &impl Consumer<Self>) {
        let deferred = {
            let mut revocations = self.revocations.lock().expect("revocations lock");
            revocations.holding = false;
            std::mem::take(&mut revocations.deferred)
        };
        if deferred.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for (topic, partition) in &deferred {
            tpl.add_partition(topic, *partition);
        }
        if let Err(e) = consumer.incremental_unassign(&tpl) {
            tracing::error!(connector = %self.connector, error = %e, "revoking partitions failed");
        }
        let closing = self.closing.load(std::sync::atomic::Ordering::SeqCst);
        self.revoked(deferred, closing);
    }

    /// Whether the task still owns `partition` (a revoked one's records are
    /// not processed).
    pub fn owns(&self, topic: &str, partition: i32) -> bool {
        self.assigned
            .lock()
            .expect("assigned lock")
            .contains(&(topic.to_string(), partition))
    }

    /// The task is stopping: what its consumer gives up from now on is no
    /// rebalance (with static membership the group does not even see it).
    pub fn mark_closing(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn revoked(&self, partitions: Vec<(String, i32)>, closing: bool) {
        if !partitions.is_empty() {
            if closing {
                tracing::info!(connector = %self.connector, task = self.task, released = ?partitions, "partitions released as the task stops");
            } else {
                tracing::info!(connector = %self.connector, task = self.task, lost = ?partitions, "rebalance: partitions revoked");
            }
        }
        self.record_rebalance(&partitions, false, !closing);
        let _ = self.events.send(ConsumerEvent::Revoked(partitions));
    }

    /// New partitions are paused on assignment, for the task to seek and
    /// resume them (see [`ConsumerEvent::Assigned`]).
    pub fn pausing_assigned_partitions(mut self) -> Self {
        self.pause_assigned = true;
        self
    }

    /// Counts a rebalance (unless `count` is false: the task's own stop)
    /// and the partitions it moved, and tracks the assignment.
    fn record_rebalance(&self, partitions: &[(String, i32)], gained: bool, count: bool) {
        let task = self.task.to_string();
        // librdkafka also reports cooperative rounds that move nothing.
        if count && !partitions.is_empty() {
            let change = if gained { "gained" } else { "lost" };
            self.metrics
                .rebalances
                .with_label_values(&[self.connector.as_ref(), task.as_str()])
                .inc();
            self.metrics
                .rebalance_partitions
                .with_label_values(&[self.connector.as_ref(), task.as_str(), change])
                .inc_by(partitions.len() as u64);
        }
        let mut assigned = self.assigned.lock().expect("assigned lock");
        for p in partitions {
            if gained {
                assigned.insert(p.clone());
            } else {
                assigned.remove(p);
                // A partition this task no longer owns has no lag of its own.
                let _ = self.metrics.consumer_lag.remove_label_values(&[
                    self.connector.as_ref(),
                    p.0.as_str(),
                    &p.1.to_string(),
                ]);
            }
        }
        self.metrics
            .assigned_partitions
            .with_label_values(&[self.connector.as_ref(), task.as_str()])
            .set(assigned.len() as i64);
    }

    fn set_start_positions(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) {
        let mut committed = None;
        for attempt in 1..=5 {
            match consumer.committed_offsets(tpl.clone(), Duration::from_secs(10)) {
                Ok(c) => {
                    committed = Some(c);
                    break;
                }
                Err(e) => {
                    tracing::warn!(connector = %self.connector, attempt, error = %e, "reading committed offsets failed")
                }
            }
        }
        let Some(committed) = committed else {
            tracing::error!(
                connector = %self.connector,
                "could not read committed offsets; partitions without one will report an offset-reset error instead of starting from the beginning"
            );
            return;
        };
        for e in committed.elements() {
            let offset = match e.offset() {
                Offset::Offset(o) if o >= 0 => Offset::Offset(o),
                _ => Offset::Beginning,
            };
            let _ = tpl.set_partition_offset(e.topic(), e.partition(), offset);
        }
    }
}

/// The consumer error that means the committed position no longer exists
/// on the broker: records were lost (retention, or the embedded broker's
/// size limit) and must not be skipped silently.
pub fn is_offset_out_of_range(e: &KafkaError) -> bool {
    matches!(
        e,
        KafkaError::MessageConsumption(
            RDKafkaErrorCode::AutoOffsetReset | RDKafkaErrorCode::OffsetOutOfRange
        )
    )
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
        assert_eq!(c.get("queued.min.messages"), Some("20000"));
        assert_eq!(c.get("queued.max.messages.kbytes"), Some("16384"));
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
