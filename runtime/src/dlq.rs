//! Dead-letter queues: inspect what is in one, and replay its records after
//! the cause is fixed.
//!
//! Replay re-produces each dead-lettered record as it originally was (key,
//! value, headers, timestamp; the dead-letter headers removed) to its origin
//! topic, or `--to`. Its progress is the committed offsets of a consumer
//! group named after the DLQ topic and the filters, so a replay is
//! resumable, and running it again delivers nothing more. Replayed records
//! carry `x-sluice-replay` (the replay's name) and `x-sluice-replay-count`,
//! so a record that fails again is recognisable and a loop can be stopped.
//!
//! The records and the progress are written in one Kafka transaction per
//! chunk, by a producer whose `transactional.id` is the replay's name: a
//! second replay of the same DLQ with the same filters, from any worker or
//! CLI, fences the first, whose open chunk is withdrawn. So replays of one
//! DLQ and filter are exclusive, and each dead letter arrives once for
//! read_committed consumers, however a replay is interrupted.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::Serialize;

use crate::errors::Stage;
use crate::kafka::KafkaClients;

pub const REPLAY_HEADER: &str = "x-sluice-replay";
pub const REPLAY_COUNT_HEADER: &str = "x-sluice-replay-count";
const TIMEOUT: Duration = Duration::from_secs(10);
/// Dead letters (replayed or filtered out) per transaction.
const CHUNK: usize = 500;

/// A replay that what was asked makes impossible: an unknown stage, a
/// target that is the dead-letter queue itself or an internal topic, a dead
/// letter that names no origin topic when no target is given. The REST API
/// answers it 400; any other error of [`replay`] is Kafka failing (502).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidReplay(pub String);

/// The dead-letter queue's topic does not exist (yet: it is created with
/// the first dead letter), or has no partitions.
#[derive(Debug, thiserror::Error)]
#[error("topic `{0}` does not exist or has no partitions")]
pub struct MissingTopic(pub String);

/// One record read from a DLQ, with its dead-letter context. Public for
/// the fuzz targets (`fuzz/`), not an API.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct DeadLetter {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub timestamp: Option<i64>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl DeadLetter {
    pub fn header(&self, key: &str) -> Option<String> {
        self.headers
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_deref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }

    pub fn origin_topic(&self) -> Option<String> {
        self.header("x-dead-letter-origin-topic")
            .or_else(|| self.header("__connect.errors.topic"))
            .filter(|t| !t.is_empty())
    }

    pub fn error_class(&self) -> String {
        self.header("x-dead-letter-error-class")
            .or_else(|| self.header("__connect.errors.exception.class.name"))
            .unwrap_or_else(|| "unknown".into())
    }

    pub fn stage(&self) -> String {
        self.header("x-dead-letter-stage")
            .or_else(|| self.header("__connect.errors.stage"))
            .unwrap_or_else(|| "unknown".into())
    }

    pub fn replay_count(&self) -> u32 {
        self.header(REPLAY_COUNT_HEADER)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    /// The original headers: without the dead-letter context, nor an
    /// earlier replay's marks.
    pub fn original_headers(&self) -> impl Iterator<Item = &(String, Option<Vec<u8>>)> {
        self.headers.iter().filter(|(k, _)| {
            !k.starts_with("x-dead-letter-")
                && !k.starts_with("__connect.errors.")
                && k != REPLAY_HEADER
                && k != REPLAY_COUNT_HEADER
        })
    }
}

/// Reads a topic's partitions from `start` up to the high watermarks seen
/// when reading began, calling `each` per record; `each` returns false to
/// stop early.
fn read_to_end(
    consumer: &BaseConsumer,
    topic: &str,
    start: impl Fn(i32) -> Offset,
    mut each: impl FnMut(DeadLetter) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .map_err(|e| anyhow::anyhow!("reading the metadata of topic `{topic}`: {e}"))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .map(|t| t.partitions().iter().map(|p| p.id()).collect())
        .unwrap_or_default();
    if partitions.is_empty() {
        return Err(MissingTopic(topic.to_string()).into());
    }
    let mut remaining: BTreeMap<i32, i64> = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for p in partitions {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, TIMEOUT)
            .map_err(|e| anyhow::anyhow!("reading the offsets of {topic}-{p}: {e}"))?;
        let from = match start(p) {
            Offset::Offset(o) => o.max(low),
            _ => low,
        };
        if from < high {
            remaining.insert(p, high);
            tpl.add_partition_offset(topic, p, Offset::Offset(from))?;
        }
    }
    if remaining.is_empty() {
        return Ok(());
    }
    consumer.assign(&tpl)?;
    let mut idle = 0;
    while !remaining.is_empty() {
        match consumer.poll(Duration::from_millis(500)) {
            None => {
                idle += 1;
                if idle > 60 {
                    anyhow::bail!(
                        "reading `{topic}` stalled: no records for 30 s before the end of {remaining:?}"
                    );
                }
            }
            Some(Err(e)) => anyhow::bail!("reading `{topic}`: {e}"),
            Some(Ok(m)) => {
                idle = 0;
                let (p, o) = (m.partition(), m.offset());
                if let Some(high) = remaining.get(&p).copied() {
                    if o + 1 >= high {
                        remaining.remove(&p);
                    }
                    if o >= high {
                        continue;
                    }
                }
                // A key that is not UTF-8 is kept made valid: inspecting
                // and replaying a dead letter never fails on its headers.
                let headers = crate::kafka::read_headers(&m)
                    .0
                    .into_iter()
                    .map(|h| (h.key, h.value))
                    .collect();
                let letter = DeadLetter {
                    partition: p,
                    offset: o,
                    key: m.key().map(<[u8]>::to_vec),
                    value: m.payload().map(<[u8]>::to_vec),
                    timestamp: m.timestamp().to_millis(),
                    headers,
                };
                if !each(letter)? {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub partition: i32,
    pub offset: i64,
    pub origin_topic: Option<String>,
    pub origin_partition: Option<String>,
    pub origin_offset: Option<String>,
    pub stage: String,
    pub error_class: String,
    pub message: Option<String>,
    pub replayed_before: u32,
    pub value_preview: Option<String>,
    /// The record's key as text (lossy UTF-8), cut to 120 characters.
    pub key_preview: Option<String>,
    /// Its timestamp (ms since the epoch), if it has one.
    pub timestamp: Option<i64>,
    /// Every header, dead-letter context included, in order: the value as
    /// text when it is UTF-8, else as `0x` and its bytes in hex; null for a
    /// header with no value.
    pub headers: Vec<(String, Option<String>)>,
}

/// Dead letters of one error class that failed at one stage.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub error_class: String,
    pub stage: String,
    pub count: u64,
}

/// A header's value for people: its text when UTF-8, else `0x` and hex.
fn header_text(v: &[u8]) -> String {
    match std::str::from_utf8(v) {
        Ok(t) => t.to_string(),
        Err(_) => {
            let mut out = String::with_capacity(2 + v.len() * 2);
            out.push_str("0x");
            for b in v {
                out.push_str(&format!("{b:02x}"));
            }
            out
        }
    }
}

/// Text cut to `n` characters (lossy UTF-8).
fn preview(b: &[u8], n: usize) -> String {
    String::from_utf8_lossy(b).chars().take(n).collect()
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct InspectReport {
    pub topic: String,
    pub total: u64,
    pub by_stage: BTreeMap<String, u64>,
    pub by_error_class: BTreeMap<String, u64>,
    pub by_origin_topic: BTreeMap<String, u64>,
    /// Counts by error class and stage together, the largest first.
    pub groups: Vec<Group>,
    /// Records that had already been replayed and failed again.
    pub failed_again_after_replay: u64,
    pub samples: Vec<Sample>,
}

/// Counts a DLQ by stage, error class and origin topic, with up to
/// `samples_per_class` sample records for each error class and stage.
pub fn inspect(
    clients: &KafkaClients,
    topic: &str,
    samples_per_class: usize,
) -> anyhow::Result<InspectReport> {
    let consumer = clients.tool_consumer(&format!("sluice-dlq-inspect-{}", std::process::id()))?;
    let mut report = InspectReport {
        topic: topic.to_string(),
        ..Default::default()
    };
    let mut sampled: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut groups: BTreeMap<(String, String), u64> = BTreeMap::new();
    read_to_end(
        &consumer,
        topic,
        |_| Offset::Beginning,
        |d| {
            report.total += 1;
            let class = d.error_class();
            let stage = d.stage();
            *groups.entry((class.clone(), stage.clone())).or_default() += 1;
            *report.by_stage.entry(stage.clone()).or_default() += 1;
            *report.by_error_class.entry(class.clone()).or_default() += 1;
            *report
                .by_origin_topic
                .entry(d.origin_topic().unwrap_or_else(|| "unknown".into()))
                .or_default() += 1;
            if d.replay_count() > 0 {
                report.failed_again_after_replay += 1;
            }
            let n = sampled.entry((class.clone(), stage.clone())).or_default();
            if *n < samples_per_class {
                *n += 1;
                report.samples.push(Sample {
                    partition: d.partition,
                    offset: d.offset,
                    origin_topic: d.origin_topic(),
                    origin_partition: d.header("__connect.errors.partition"),
                    origin_offset: d.header("__connect.errors.offset"),
                    stage,
                    error_class: class,
                    message: d.header("__connect.errors.exception.message"),
                    replayed_before: d.replay_count(),
                    value_preview: d.value.as_deref().map(|v| preview(v, 120)),
                    key_preview: d.key.as_deref().map(|k| preview(k, 120)),
                    timestamp: d.timestamp,
                    headers: d
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_deref().map(header_text)))
                        .collect(),
                });
            }
            Ok(true)
        },
    )?;
    report.groups = groups
        .into_iter()
        .map(|((error_class, stage), count)| Group {
            error_class,
            stage,
            count,
        })
        .collect();
    report.groups.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.error_class.cmp(&b.error_class))
    });
    Ok(report)
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayOptions {
    /// Replay to this topic instead of each record's origin topic.
    #[serde(default)]
    pub to: Option<String>,
    /// Only records with this error class.
    #[serde(default)]
    pub error_class: Option<String>,
    /// Only records that failed at this stage.
    #[serde(default)]
    pub stage: Option<String>,
    /// At most this many records.
    #[serde(default)]
    pub max: Option<u64>,
    /// Count what would be replayed; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayReport {
    pub topic: String,
    /// The replay's name: its consumer group, and the `x-sluice-replay` header.
    pub replay: String,
    pub dry_run: bool,
    pub replayed: u64,
    pub skipped_by_filter: u64,
    pub by_target_topic: BTreeMap<String, u64>,
}

/// The consumer group holding a replay's progress: one per DLQ and filter,
/// so replays of different error classes do not hide each other's records.
/// The stage in its canonical spelling, so `task_put` and `TASK_PUT` are
/// one replay.
pub fn replay_group(topic: &str, opts: &ReplayOptions) -> String {
    let stage = opts
        .stage
        .as_deref()
        .map(|s| Stage::parse(s).map_or_else(|| s.to_string(), |st| st.as_str().to_string()));
    format!(
        "sluice-dlq-replay.{topic}.{}.{}",
        opts.error_class.as_deref().unwrap_or("*"),
        stage.as_deref().unwrap_or("*")
    )
}

/// Refuses to replay into Kafka's own topics (`__consumer_offsets`,
/// `__transaction_state`, ...) or the worker's offsets topic.
fn check_target(clients: &KafkaClients, target: &str) -> anyhow::Result<()> {
    if target.starts_with("__") || target == clients.offsets_topic().name {
        return Err(InvalidReplay(format!(
            "`{target}` is an internal topic; dead letters are never replayed into it"
        ))
        .into());
    }
    Ok(())
}

/// Where the last replay of this group stopped, by partition.
fn committed_positions(consumer: &BaseConsumer, topic: &str) -> anyhow::Result<BTreeMap<i32, i64>> {
    let metadata = consumer.fetch_metadata(Some(topic), TIMEOUT)?;
    let mut tpl = TopicPartitionList::new();
    if let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) {
        for p in t.partitions() {
            tpl.add_partition(topic, p.id());
        }
    }
    let committed = consumer.committed_offsets(tpl, TIMEOUT)?;
    Ok(committed
        .elements()
        .iter()
        .filter_map(|e| match e.offset() {
            Offset::Offset(o) => Some((e.partition(), o)),
            _ => None,
        })
        .collect())
}

/// librdkafka's mock cluster names itself `mockCluster<address>`.
fn is_mock(producer: &FutureProducer) -> bool {
    producer
        .client()
        .fetch_cluster_id(TIMEOUT)
        .is_some_and(|id| id.starts_with("mockCluster"))
}

/// The transactional producer of one replay. Starting it fences any other
/// replay with the same name and withdraws the chunk it had open.
struct ReplayWriter {
    producer: FutureProducer,
    group: String,
    open: bool,
    /// librdkafka's mock cluster (the embedded broker, or one a test runs)
    /// answers TxnOffsetCommit without storing anything: there the progress
    /// is also committed plainly, as the mock enforces no transaction
    /// anyway. Never on a real broker, where a fenced replay's late plain
    /// commit could move the progress back.
    mock_broker: bool,
}

impl ReplayWriter {
    fn start(clients: &KafkaClients, group: &str) -> anyhow::Result<Self> {
        let producer = clients.transactional_producer(
            &format!("{group}-producer"),
            group,
            &Default::default(),
        )?;
        producer.init_transactions(TIMEOUT).map_err(|e| {
            anyhow::anyhow!("starting the replay's transactional producer `{group}`: {e}")
        })?;
        let mock_broker = clients.is_embedded() || is_mock(&producer);
        Ok(Self {
            producer,
            group: group.to_string(),
            open: false,
            mock_broker,
        })
    }

    fn send(&mut self, record: FutureRecord<'_, [u8], [u8]>) -> anyhow::Result<()> {
        let target = record.topic.to_string();
        self.begin()?;
        // The transaction's commit waits for every record; a failed one
        // fails the commit, so the delivery futures are not needed.
        self.producer
            .send_result(record)
            .map_err(|(e, _)| self.failed(&format!("replaying to `{target}`"), e))?;
        Ok(())
    }

    fn begin(&mut self) -> anyhow::Result<()> {
        if !self.open {
            self.producer
                .begin_transaction()
                .map_err(|e| self.failed("beginning a transaction", e))?;
            self.open = true;
        }
        Ok(())
    }

    /// Commits the records sent since the last commit together with the
    /// replay's progress past them; on failure nothing of the chunk stays.
    fn commit(
        &mut self,
        consumer: &BaseConsumer,
        topic: &str,
        progress: &BTreeMap<i32, i64>,
    ) -> anyhow::Result<()> {
        if progress.is_empty() {
            return Ok(());
        }
        self.begin()?;
        let mut tpl = TopicPartitionList::new();
        for (p, next) in progress {
            tpl.add_partition_offset(topic, *p, Offset::Offset(*next))?;
        }
        let group = consumer
            .group_metadata()
            .ok_or_else(|| anyhow::anyhow!("the replay's consumer has no group metadata"))?;
        let result = self
            .producer
            .send_offsets_to_transaction(&tpl, &group, TIMEOUT)
            .and_then(|()| self.producer.commit_transaction(TIMEOUT));
        self.open = false;
        result.map_err(|e| {
            // Withdraw what the chunk wrote; if even that fails, the
            // transaction times out on the broker and is aborted there.
            let _ = self.producer.abort_transaction(TIMEOUT);
            self.failed("committing a chunk of the replay", e)
        })?;
        if self.mock_broker {
            consumer.commit(&tpl, rdkafka::consumer::CommitMode::Sync)?;
        }
        Ok(())
    }

    fn failed(&self, what: &str, e: KafkaError) -> anyhow::Error {
        let fenced = crate::kafka::transaction::is_fencing(e.rdkafka_error_code())
            || self
                .producer
                .client()
                .fatal_error()
                .is_some_and(|(code, _)| crate::kafka::transaction::is_fencing(Some(code)));
        if fenced {
            anyhow::anyhow!(
                "{what}: another replay of this dead-letter queue with the same filters (`{}`) started and took over; this one stopped, and the records of its uncommitted chunk were withdrawn (the other replay delivers them)",
                self.group
            )
        } else {
            anyhow::anyhow!(
                "{what}: {e}; the uncommitted chunk was withdrawn, and running the replay again resumes after the last committed one"
            )
        }
    }
}

/// A dead letter as it goes back: its original headers, plus which replay
/// sent it and how many times it has been replayed.
#[doc(hidden)]
pub fn replayed_record<'a>(
    d: &'a DeadLetter,
    target: &'a str,
    group: &'a str,
) -> FutureRecord<'a, [u8], [u8]> {
    let count = d.replay_count().saturating_add(1).to_string();
    let mut headers = OwnedHeaders::new();
    for (k, v) in d.original_headers() {
        headers = headers.insert(KafkaHeader {
            key: k,
            value: v.as_deref(),
        });
    }
    headers = headers.insert(KafkaHeader {
        key: REPLAY_HEADER,
        value: Some(group.as_bytes()),
    });
    headers = headers.insert(KafkaHeader {
        key: REPLAY_COUNT_HEADER,
        value: Some(count.as_bytes()),
    });
    crate::kafka::future_record(
        target,
        d.key.as_deref(),
        d.value.as_deref(),
        d.timestamp,
        headers,
    )
}

pub fn replay(
    clients: &KafkaClients,
    topic: &str,
    opts: &ReplayOptions,
) -> anyhow::Result<ReplayReport> {
    let stage = match &opts.stage {
        Some(s) => Some(
            Stage::parse(s)
                .ok_or_else(|| InvalidReplay(format!("stage `{s}` is not one of TASK_POLL, KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER, TRANSFORMATION, TASK_PUT, KAFKA_PRODUCE, KAFKA_CONSUME")))?
                .as_str(),
        ),
        None => None,
    };
    if opts.to.as_deref() == Some(topic) {
        return Err(InvalidReplay("--to names the dead-letter queue itself".into()).into());
    }
    if let Some(to) = &opts.to {
        check_target(clients, to)?;
    }
    let group = replay_group(topic, opts);
    let consumer = clients.tool_consumer(&group)?;
    // Fence any other replay of this name first: the positions read next
    // are then stable, its open chunk withdrawn.
    let mut writer = match opts.dry_run {
        true => None,
        false => Some(ReplayWriter::start(clients, &group)?),
    };
    let resume = committed_positions(&consumer, topic)?;

    let mut report = ReplayReport {
        topic: topic.to_string(),
        replay: group.clone(),
        dry_run: opts.dry_run,
        ..Default::default()
    };
    let mut progress: BTreeMap<i32, i64> = BTreeMap::new();
    let mut in_chunk = 0;
    read_to_end(
        &consumer,
        topic,
        |p| {
            resume
                .get(&p)
                .map_or(Offset::Beginning, |o| Offset::Offset(*o))
        },
        |d| {
            if opts.max.is_some_and(|max| report.replayed >= max) {
                return Ok(false);
            }
            let selected = opts
                .error_class
                .as_ref()
                .is_none_or(|c| *c == d.error_class())
                && stage.is_none_or(|s| s == d.stage());
            if selected {
                let target = match (&opts.to, d.origin_topic()) {
                    (Some(to), _) => to.clone(),
                    (None, Some(origin)) => {
                        check_target(clients, &origin)?;
                        origin
                    }
                    (None, None) => {
                        return Err(InvalidReplay(format!(
                            "the record at {topic}-{}@{} names no origin topic; replay it with --to",
                            d.partition, d.offset
                        ))
                        .into());
                    }
                };
                if let Some(writer) = writer.as_mut() {
                    writer.send(replayed_record(&d, &target, &group))?;
                }
                report.replayed += 1;
                *report.by_target_topic.entry(target).or_default() += 1;
            } else {
                report.skipped_by_filter += 1;
            }
            progress.insert(d.partition, d.offset + 1);
            in_chunk += 1;
            if let Some(writer) = writer.as_mut()
                && in_chunk >= CHUNK
            {
                writer.commit(&consumer, topic, &progress)?;
                in_chunk = 0;
            }
            Ok(true)
        },
    )?;
    if let Some(writer) = writer.as_mut()
        && in_chunk > 0
    {
        writer.commit(&consumer, topic, &progress)?;
    }
    Ok(report)
}

impl InspectReport {
    /// A human-readable table.
    pub fn render(&self) -> String {
        let mut out = format!(
            "dead-letter queue `{}`: {} record(s)\n",
            self.topic, self.total
        );
        for (title, map) in [
            ("stage", &self.by_stage),
            ("error class", &self.by_error_class),
            ("origin topic", &self.by_origin_topic),
        ] {
            out.push_str(&format!("\nby {title}:\n"));
            for (k, v) in map {
                out.push_str(&format!("  {k:<32} {v:>8}\n"));
            }
        }
        if self.failed_again_after_replay > 0 {
            out.push_str(&format!(
                "\n{} record(s) failed again after a replay\n",
                self.failed_again_after_replay
            ));
        }
        if !self.samples.is_empty() {
            out.push_str("\nsamples:\n");
            for s in &self.samples {
                out.push_str(&format!(
                    "  {}@{}  {} {} from {}: {}\n    value: {}\n",
                    s.partition,
                    s.offset,
                    s.stage,
                    s.error_class,
                    s.origin_topic.as_deref().unwrap_or("?"),
                    s.message.as_deref().unwrap_or("(context headers off)"),
                    s.value_preview.as_deref().unwrap_or("null")
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(stage: Option<&str>, to: Option<&str>) -> ReplayOptions {
        ReplayOptions {
            stage: stage.map(str::to_string),
            to: to.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn a_stage_spelled_differently_is_the_same_replay() {
        let canonical = replay_group("dlq", &options(Some("TASK_PUT"), None));
        assert_eq!(
            replay_group("dlq", &options(Some("task_put"), None)),
            canonical
        );
        assert_eq!(
            replay_group("dlq", &options(Some("Task_Put"), None)),
            canonical
        );
    }

    #[test]
    fn internal_topics_are_refused_as_targets() {
        let config = crate::config::WorkerConfig::from_map(&Default::default()).unwrap();
        // Nothing is contacted before the options are checked.
        let clients = KafkaClients::new(&config, "127.0.0.1:1".into(), None);
        for internal in [
            "__consumer_offsets",
            "__transaction_state",
            "sluice-offsets",
        ] {
            let err = replay(&clients, "dlq", &options(None, Some(internal))).unwrap_err();
            assert!(
                err.to_string().contains("internal topic"),
                "{internal}: {err}"
            );
        }
    }
}
