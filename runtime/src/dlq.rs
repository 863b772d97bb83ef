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

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::Serialize;

use crate::errors::Stage;
use crate::kafka::KafkaClients;

pub const REPLAY_HEADER: &str = "x-sluice-replay";
pub const REPLAY_COUNT_HEADER: &str = "x-sluice-replay-count";
const TIMEOUT: Duration = Duration::from_secs(10);

/// A replay that what was asked makes impossible: an unknown stage, a
/// target that is the dead-letter queue itself or an internal topic, a dead
/// letter that names no origin topic when no target is given. The REST API
/// answers it 400; any other error of [`replay`] is Kafka failing (502).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidReplay(pub String);

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
        anyhow::bail!("topic `{topic}` does not exist or has no partitions");
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
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct InspectReport {
    pub topic: String,
    pub total: u64,
    pub by_stage: BTreeMap<String, u64>,
    pub by_error_class: BTreeMap<String, u64>,
    pub by_origin_topic: BTreeMap<String, u64>,
    /// Records that had already been replayed and failed again.
    pub failed_again_after_replay: u64,
    pub samples: Vec<Sample>,
}

/// Counts a DLQ by stage, error class and origin topic, with up to
/// `samples_per_class` sample records for each error class.
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
    let mut sampled: BTreeMap<String, usize> = BTreeMap::new();
    read_to_end(
        &consumer,
        topic,
        |_| Offset::Beginning,
        |d| {
            report.total += 1;
            let class = d.error_class();
            *report.by_stage.entry(d.stage()).or_default() += 1;
            *report.by_error_class.entry(class.clone()).or_default() += 1;
            *report
                .by_origin_topic
                .entry(d.origin_topic().unwrap_or_else(|| "unknown".into()))
                .or_default() += 1;
            if d.replay_count() > 0 {
                report.failed_again_after_replay += 1;
            }
            let n = sampled.entry(class.clone()).or_default();
            if *n < samples_per_class {
                *n += 1;
                report.samples.push(Sample {
                    partition: d.partition,
                    offset: d.offset,
                    origin_topic: d.origin_topic(),
                    origin_partition: d.header("__connect.errors.partition"),
                    origin_offset: d.header("__connect.errors.offset"),
                    stage: d.stage(),
                    error_class: class,
                    message: d.header("__connect.errors.exception.message"),
                    replayed_before: d.replay_count(),
                    value_preview: d.value.as_ref().map(|v| {
                        let text = String::from_utf8_lossy(v);
                        text.chars().take(120).collect()
                    }),
                });
            }
            Ok(true)
        },
    )?;
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

/// Moves the replay's progress past the records Kafka has acknowledged.
fn commit_progress(
    consumer: &BaseConsumer,
    topic: &str,
    progress: &BTreeMap<i32, i64>,
    in_flight: &mut Vec<rdkafka::producer::DeliveryFuture>,
) -> anyhow::Result<()> {
    // Progress moves only past records Kafka has acknowledged.
    for delivery in in_flight.drain(..) {
        match futures::executor::block_on(delivery) {
            Ok(Ok(_)) => {}
            Ok(Err((e, _))) => {
                anyhow::bail!("replaying a record failed: {e}; progress kept before it")
            }
            Err(_) => anyhow::bail!(
                "the producer stopped; progress kept before the unacknowledged records"
            ),
        }
    }
    if progress.is_empty() {
        return Ok(());
    }
    let mut tpl = TopicPartitionList::new();
    for (p, next) in progress {
        tpl.add_partition_offset(topic, *p, Offset::Offset(*next))?;
    }
    consumer.commit(&tpl, CommitMode::Sync)?;
    Ok(())
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
    let producer: FutureProducer =
        clients.producer(&format!("{group}-producer"), &Default::default())?;
    let resume = committed_positions(&consumer, topic)?;

    let mut report = ReplayReport {
        topic: topic.to_string(),
        replay: group.clone(),
        dry_run: opts.dry_run,
        ..Default::default()
    };
    let mut progress: BTreeMap<i32, i64> = BTreeMap::new();
    let mut in_flight: Vec<rdkafka::producer::DeliveryFuture> = Vec::new();
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
                if !opts.dry_run {
                    let record = replayed_record(&d, &target, &group);
                    let delivery = producer
                        .send_result(record)
                        .map_err(|(e, _)| anyhow::anyhow!("replaying to `{target}`: {e}"))?;
                    in_flight.push(delivery);
                }
                report.replayed += 1;
                *report.by_target_topic.entry(target).or_default() += 1;
            } else {
                report.skipped_by_filter += 1;
            }
            progress.insert(d.partition, d.offset + 1);
            if !opts.dry_run && in_flight.len() >= 500 {
                commit_progress(&consumer, topic, &progress, &mut in_flight)?;
            }
            Ok(true)
        },
    )?;
    if !opts.dry_run {
        commit_progress(&consumer, topic, &progress, &mut in_flight)?;
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
