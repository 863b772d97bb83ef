//! The consuming side of sink and stream tasks: the task's consumer, its
//! batches, pausing, revocations held while a batch is in flight, offset
//! commits, and lost data reported rather than skipped.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use futures::{FutureExt, StreamExt};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::BorrowedMessage;
use rdkafka::{Message, Offset, TopicPartitionList};
use sluice_sdk::{ConnectError, Record};

use super::TaskEnv;
use crate::errors::{ErrorHandler, Stage, retry_infrastructure};
use crate::kafka::{ConsumerEvent, TaskConsumerContext, is_offset_out_of_range};

pub(crate) type TaskConsumer = StreamConsumer<TaskConsumerContext>;

/// Kafka Connect's sink consumer group: `connect-<connector>`.
pub fn group_id(connector: &str) -> String {
    format!("connect-{connector}")
}

/// The task's consumer in its connector's group (`connect-<connector>`),
/// and the rebalances it reports. New partitions stay paused until
/// [`position_assigned`] has moved them to where they start.
pub(crate) fn task_consumer(
    env: &TaskEnv,
) -> Result<(Arc<TaskConsumer>, UnboundedReceiver<ConsumerEvent>), ConnectError> {
    let (events_tx, events_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut context = TaskConsumerContext::new(
        events_tx,
        env.connector.clone(),
        env.task_id,
        env.metrics.clone(),
    );
    context = context.with_longest_batch(longest_batch(&env.common));
    // A `topics.regex` subscription sees a new topic at the next metadata
    // refresh: every 10 s rather than librdkafka's 5 minutes, so a CDC
    // source's new tables reach their sinks soon (an override wins).
    let mut overrides = env.common.consumer_overrides.clone();
    if env.common.topics_regex.is_some() {
        overrides
            .entry("topic.metadata.refresh.interval.ms".into())
            .or_insert_with(|| REGEX_METADATA_REFRESH_MS.into());
    }
    let consumer = env
        .clients
        .consumer(
            &group_id(&env.connector),
            &env.client_id(),
            context,
            &overrides,
        )
        .map_err(|e| ConnectError::fatal("creating the Kafka consumer").with_source(e))?;
    Ok((Arc::new(consumer), events_rx))
}

/// How often a `topics.regex` consumer looks for new matching topics.
const REGEX_METADATA_REFRESH_MS: &str = "10000";

/// Moves newly assigned partitions (paused by the assignment callback) to
/// the group's committed offset, or the beginning where the group has
/// none, and resumes those the task still owns, unless `resume` is false:
/// an exactly-once sink moves them on to the offsets stored with its data
/// first. A committed-offset read that fails is retried with backoff until
/// it succeeds or the task stops (returns false then).
pub(crate) async fn position_assigned(
    env: &TaskEnv,
    consumer: &Arc<TaskConsumer>,
    partitions: &[(String, i32)],
    resume: bool,
) -> Result<bool, ConnectError> {
    let mut tpl = TopicPartitionList::new();
    for (topic, partition) in partitions {
        tpl.add_partition(topic, *partition);
    }
    let mut attempt = 0;
    let committed = loop {
        attempt += 1;
        let (c, query) = (consumer.clone(), tpl.clone());
        let read = tokio::task::spawn_blocking(move || {
            c.committed_offsets(query, Duration::from_secs(10))
        });
        let result = tokio::select! {
            _ = env.cancel.cancelled() => return Ok(false),
            r = read => r.map_err(|e| ConnectError::fatal(format!("reading committed offsets: {e}")))?,
        };
        match result {
            Ok(committed) => break committed,
            Err(e) => {
                let delay = crate::config::backoff(attempt, Duration::from_secs(10));
                tracing::warn!(connector = %env.connector, task = env.task_id, attempt, error = %e, retry_in_ms = delay.as_millis() as u64, "reading the group's committed offsets failed; the new partitions wait, paused");
                tokio::select! {
                    _ = env.cancel.cancelled() => return Ok(false),
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    };
    let c = consumer.clone();
    let to_position = partitions.to_vec();
    tokio::task::spawn_blocking(move || -> Result<(), rdkafka::error::KafkaError> {
        // A partition revoked meanwhile is its new owner's to position.
        let owned = c.assignment()?;
        let mut seek = TopicPartitionList::new();
        for e in committed.elements() {
            if owned.find_partition(e.topic(), e.partition()).is_none() {
                continue;
            }
            // Never committed: from the beginning, as Kafka Connect.
            let start = match e.offset() {
                Offset::Offset(o) if o >= 0 => Offset::Offset(o),
                _ => Offset::Beginning,
            };
            seek.add_partition_offset(e.topic(), e.partition(), start)?;
        }
        if seek.count() > 0 {
            let done = c.seek_partitions(seek.clone(), Duration::from_secs(30))?;
            if let Some(e) = done.elements().iter().find_map(|e| e.error().err()) {
                return Err(e);
            }
        }
        c.context().positioned(&to_position);
        if resume {
            let owned = c.assignment()?;
            let mut ours = TopicPartitionList::new();
            for e in seek.elements() {
                if owned.find_partition(e.topic(), e.partition()).is_some() {
                    ours.add_partition(e.topic(), e.partition());
                }
            }
            c.resume(&ours)?;
        }
        Ok(())
    })
    .await
    .map_err(|e| ConnectError::fatal(format!("positioning thread failed: {e}")))?
    .map_err(|e| {
        ConnectError::retriable("moving new partitions to their committed offsets").with_source(e)
    })?;
    tracing::info!(
        connector = %env.connector,
        task = env.task_id,
        positions = ?committed_summary(partitions),
        "new partitions start from the group's committed offsets"
    );
    Ok(true)
}

fn committed_summary(partitions: &[(String, i32)]) -> Vec<String> {
    partitions.iter().map(|(t, p)| format!("{t}-{p}")).collect()
}

/// Subscribes the task's consumer to the connector's `topics` (or
/// `topics.regex`, which librdkafka matches against the cluster's topics,
/// new ones included at each metadata refresh).
pub(crate) fn subscribe(env: &TaskEnv, consumer: &TaskConsumer) -> Result<(), ConnectError> {
    let pattern = env
        .common
        .topics_regex
        .as_deref()
        .map(crate::config::topics_regex_subscription);
    let topics: Vec<&str> = match &pattern {
        Some(p) => vec![p.as_str()],
        None => env.common.topics.iter().map(String::as_str).collect(),
    };
    consumer
        .subscribe(&topics)
        .map_err(|e| ConnectError::fatal(format!("subscribing to {topics:?}")).with_source(e))
}

/// The end of a consuming task: nothing held any more, and the group left
/// if the task goes away for good.
pub(crate) async fn close_consumer(env: &TaskEnv, consumer: &Arc<TaskConsumer>) {
    consumer.context().mark_closing();
    release_revocations(consumer).await;
    if env.leave_group.load(std::sync::atomic::Ordering::SeqCst) {
        // The task goes away for good (or its offsets are to be changed):
        // leave the group now rather than when the session times out, so
        // the partitions move on at once.
        let leaving = consumer.clone();
        let _ = tokio::task::spawn_blocking(move || leaving.unsubscribe()).await;
    }
    // Otherwise (a restart) the consumer closes without leaving: as a
    // static member, its successor takes the same partitions back without
    // a rebalance if it rejoins within `session.timeout.ms`.
}

/// Marks the consumer closing and releases held revocations when dropped,
/// before the consumer closes (it holds a reference): a close waiting for
/// a revocation the loop will never release would never end.
pub(crate) struct ReleaseOnDrop(pub(crate) Arc<TaskConsumer>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let context = self.0.context();
        context.mark_closing();
        context.release_revocations(self.0.as_ref());
    }
}

/// How long one batch may take to be written, with its retries: the
/// consumer's `max.poll.interval.ms` (the rebalance timeout, which bounds
/// how long a revocation can wait for the batch) is sized to cover it.
pub(crate) fn longest_batch(common: &crate::config::CommonConfig) -> Duration {
    let retries = match common.errors.infrastructure_retry {
        crate::config::RetryBudget::Within(d) => d,
        crate::config::RetryBudget::Forever => Duration::MAX,
    };
    Duration::from_millis(common.batch_max_ms).saturating_add(retries)
}

/// Releases the partitions whose revocation waited for the batch.
pub(crate) async fn release_revocations(consumer: &Arc<TaskConsumer>) {
    let c = consumer.clone();
    let _ = tokio::task::spawn_blocking(move || c.context().release_revocations(c.as_ref())).await;
}

/// While the connector is paused: the assigned partitions are paused and the
/// consumer keeps polling (so it stays in its group); a record from a
/// partition assigned meanwhile is sought back and that partition paused
/// too. Returns false if the task is being stopped.
pub(crate) async fn pause_consumer(env: &mut TaskEnv, consumer: &Arc<TaskConsumer>) -> bool {
    env.status.set(crate::task::State::Paused, None);
    tracing::info!("paused");
    if let Ok(assignment) = consumer.assignment() {
        let _ = consumer.pause(&assignment);
    }
    loop {
        if !*env.paused.borrow_and_update() {
            break;
        }
        tokio::select! {
            _ = env.cancel.cancelled() => return false,
            _ = env.paused.changed() => {}
            received = tokio::time::timeout(Duration::from_millis(200), consumer.recv()) => {
                if let Ok(Ok(m)) = received {
                    let (topic, partition, offset) = (m.topic().to_string(), m.partition(), m.offset());
                    drop(m);
                    let _ = consumer.seek(&topic, partition, Offset::Offset(offset), Duration::from_secs(5));
                    let mut tpl = TopicPartitionList::new();
                    tpl.add_partition(&topic, partition);
                    let _ = consumer.pause(&tpl);
                }
            }
        }
    }
    if let Ok(assignment) = consumer.assignment() {
        let _ = consumer.resume(&consumer.context().resumable(&assignment));
    }
    env.status.set(crate::task::State::Running, None);
    tracing::info!("resumed");
    true
}

/// The next batch by the connector's `batch.*` keys ([`next_batch_until`]).
/// When one came, the transform chain is swapped first if it was updated
/// (a batch boundary) and the batch is counted.
pub(crate) async fn read_batch(
    env: &mut TaskEnv,
    consumer: &Arc<TaskConsumer>,
    stop_waiting: impl std::future::Future<Output = ()>,
) -> Result<Vec<Consumed>, ConnectError> {
    let max_records = env.common.batch_max_records;
    let max_wait = Duration::from_millis(env.common.batch_max_ms);
    let linger = Duration::from_millis(env.common.batch_linger_ms);
    let batch =
        next_batch_until(env, consumer, max_records, max_wait, linger, stop_waiting).await?;
    if !batch.is_empty() {
        env.swap_chain_if_updated().await;
        env.count("consume", "ok", batch.len());
        env.observe_batch(batch.len());
        env.note_topics(batch.iter().map(|r| r.topic.as_str()));
    }
    Ok(batch)
}

/// Up to `max_records`, waiting at most `max_wait` once the first arrives;
/// once the consumer has no record at hand, at most `linger` more (with 0
/// the batch closes then: under load the consumer's queue refills while a
/// batch is written, so batches still fill, and at low rates a record does
/// not wait for others that are not coming). Returns early (possibly
/// empty) when the task is cancelled, and stops waiting for a first record
/// (returning an empty batch) once `stop_waiting` completes: a batch read
/// while the previous one is written must not keep that write's follow-up
/// waiting when no record comes.
async fn next_batch_until(
    env: &TaskEnv,
    consumer: &Arc<TaskConsumer>,
    max_records: usize,
    max_wait: Duration,
    linger: Duration,
    stop_waiting: impl std::future::Future<Output = ()>,
) -> Result<Vec<Consumed>, ConnectError> {
    let mut stop_waiting = std::pin::pin!(stop_waiting);
    let mut batch = Vec::new();
    let mut deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    let mut stream = consumer.stream();
    while batch.len() < max_records {
        // A record already fetched is taken at once; only waiting for one
        // needs the timer and the cancellation check.
        let received = match stream.next().now_or_never() {
            Some(r) => Ok(r.expect("kafka streams never end")),
            None if !batch.is_empty() && linger.is_zero() => break,
            None => {
                let wait_until = if batch.is_empty() {
                    deadline
                } else {
                    deadline.min(tokio::time::Instant::now() + linger)
                };
                tokio::select! {
                    biased;
                    _ = env.cancel.cancelled() => break,
                    _ = &mut stop_waiting, if batch.is_empty() => break,
                    r = tokio::time::timeout_at(wait_until, stream.next()) => {
                        r.map(|r| r.expect("kafka streams never end"))
                    }
                }
            }
        };
        match received {
            Err(_elapsed) => break,
            Ok(Ok(message)) => {
                let context = consumer.context();
                if !context.owns(message.topic(), message.partition()) {
                    // Revoked before this record was taken: its new owner
                    // reads it.
                    continue;
                }
                if batch.is_empty() {
                    deadline = tokio::time::Instant::now() + max_wait;
                    // A revocation from now on waits until the batch is
                    // committed.
                    context.hold_revocations();
                }
                batch.push(to_record(&message));
            }
            Ok(Err(e)) if is_offset_out_of_range(&e) => {
                return Err(data_loss(env, consumer).await);
            }
            Ok(Err(e)) => {
                // librdkafka recovers from transient errors by itself.
                tracing::warn!(error = %e, "consumer error");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(batch)
}

/// Per partition: a batch's first offset and the next one to read.
pub(crate) type OffsetRanges = BTreeMap<(String, i32), (i64, i64)>;

/// A partition whose records a batch read backwards: `offset` came after
/// `after`.
#[derive(Debug, PartialEq)]
struct ReadBackwards {
    topic: String,
    partition: i32,
    offset: i64,
    after: i64,
    /// Each partition's first offset in the batch (where it is read again
    /// from) and the offset past its highest.
    ranges: OffsetRanges,
}

impl ReadBackwards {
    /// Says which partition went backwards: the batch is dropped and read
    /// again, so this is no loss, but a seek raced the read.
    fn report(&self, env: &TaskEnv) {
        tracing::error!(
            connector = %env.connector,
            task = env.task_id,
            topic = %self.topic,
            partition = self.partition,
            offset = self.offset,
            after = self.after,
            "a batch read a partition backwards (a seek raced the read); it is not written, and its partitions are read again from where it began"
        );
    }
}

/// [`offset_ranges`] of a batch read. A batch that read a partition
/// backwards is reported and must not be written (its range would skip or
/// repeat records; committed exactly once, it would move a stored offset
/// back): the error is its ranges, whose first offsets it is read again
/// from.
pub(crate) fn batch_ranges(
    env: &TaskEnv,
    batch: &[Consumed],
) -> Result<OffsetRanges, OffsetRanges> {
    offset_ranges(
        batch
            .iter()
            .map(|r| (r.topic.as_str(), r.partition, r.offset)),
    )
    .map_err(|backwards| {
        backwards.report(env);
        backwards.ranges
    })
}

/// Per partition of a batch's `(topic, partition, offset)`s: its first
/// offset, and the next one to read, committed once every record was
/// written or dead-lettered. Records of a partition must come in rising
/// offsets (the consumer's order): one that does not means a seek raced
/// the read, and the batch's records of that partition are no range.
fn offset_ranges<'a>(
    records: impl Iterator<Item = (&'a str, i32, i64)>,
) -> Result<OffsetRanges, ReadBackwards> {
    let mut ranges: BTreeMap<(&str, i32), (i64, i64)> = BTreeMap::new();
    let mut backwards = None;
    for (topic, partition, offset) in records {
        let (_, next) = ranges.entry((topic, partition)).or_insert((offset, offset));
        // Every partition is read to the end: each is read again from
        // its first record if one went backwards.
        if offset < *next && backwards.is_none() {
            backwards = Some((topic, partition, offset, *next - 1));
        }
        *next = (*next).max(offset + 1);
    }
    let ranges = ranges
        .into_iter()
        .map(|((topic, partition), range)| ((topic.to_string(), partition), range))
        .collect();
    match backwards {
        None => Ok(ranges),
        Some((topic, partition, offset, after)) => Err(ReadBackwards {
            topic: topic.to_string(),
            partition,
            offset,
            after,
            ranges,
        }),
    }
}

/// Names the partitions whose position the broker no longer has, counts
/// them, and fails the task: skipping ahead would lose records silently.
pub(crate) async fn data_loss(env: &TaskEnv, consumer: &Arc<TaskConsumer>) -> ConnectError {
    let consumer = consumer.clone();
    let found = tokio::task::spawn_blocking(move || {
        let mut lost = Vec::new();
        let assignment = consumer.assignment().unwrap_or_default();
        let committed = consumer
            .committed_offsets(assignment, Duration::from_secs(10))
            .unwrap_or_default();
        for e in committed.elements() {
            let Ok((low, high)) =
                consumer.fetch_watermarks(e.topic(), e.partition(), Duration::from_secs(10))
            else {
                continue;
            };
            if let Offset::Offset(position) = e.offset()
                && (position < low || position > high)
            {
                lost.push((e.topic().to_string(), e.partition(), position, low, high));
            }
        }
        lost
    })
    .await
    .unwrap_or_default();
    let mut details = Vec::new();
    for (topic, partition, position, low, high) in &found {
        env.metrics
            .data_loss
            .with_label_values(&[
                env.connector.as_ref(),
                topic.as_str(),
                &partition.to_string(),
            ])
            .inc();
        details.push(if position < low {
            format!("{topic}-{partition}: records {position}..{low} are gone from the broker before they were read")
        } else {
            format!(
                "{topic}-{partition}: the committed position {position} is beyond the partition's end {high}; the broker lost records it had acknowledged"
            )
        });
    }
    if found.is_empty() {
        env.metrics
            .data_loss
            .with_label_values(&[env.connector.as_ref(), "unknown", "-1"])
            .inc();
        details.push("the consumer's position is out of range on a partition".into());
    }
    tracing::error!(connector = %env.connector, lost = ?details, "data loss detected");
    ConnectError::fatal(format!(
        "data loss: {}; not skipping ahead. Reset the connector's offsets deliberately to go on",
        details.join("; ")
    ))
}

/// At-most-once: the offsets must be committed before anything is written;
/// retried like any infrastructure failure, and the task fails (nothing
/// written, nothing skipped) if the group never takes them.
pub(crate) async fn commit_before_writing(
    _env: &TaskEnv,
    consumer: &Arc<TaskConsumer>,
    errors: &ErrorHandler,
    next: &BTreeMap<(String, i32), i64>,
) -> Result<(), ConnectError> {
    let committed: Result<_, ConnectError> = retry_infrastructure!(
        errors,
        Stage::TaskPut,
        "committing offsets",
        commit_offsets(consumer, next).await.map_err(|e| {
            ConnectError::retriable("committing offsets before writing (at-most-once)")
                .with_source(e)
        })
    );
    committed?.ok_or_else(|| {
        ConnectError::retriable("stopped before the offsets were committed; nothing was written")
    })
}

async fn commit_offsets(
    consumer: &Arc<TaskConsumer>,
    next: &BTreeMap<(String, i32), i64>,
) -> Result<(), rdkafka::error::KafkaError> {
    let mut tpl = TopicPartitionList::with_capacity(next.len());
    for ((topic, partition), offset) in next {
        let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset));
    }
    let consumer = consumer.clone();
    tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
        .await
        .unwrap_or(Err(rdkafka::error::KafkaError::Canceled))
}

pub(crate) async fn commit(
    env: &TaskEnv,
    consumer: &Arc<TaskConsumer>,
    next: &BTreeMap<(String, i32), i64>,
) {
    if let Err(e) = commit_offsets(consumer, next).await {
        // The records are written; without the commit they are read again
        // after a restart or rebalance, which the idempotent sink absorbs.
        env.task_metrics.commit_failures.inc();
        tracing::warn!(error = %e, "committing offsets failed; the records will be delivered again");
    }
}

/// A consumed record, and the failure of the header converter stage if its
/// headers could not be read as the record model needs them.
pub(crate) struct Consumed {
    pub record: Record,
    pub header_error: Option<ConnectError>,
}

impl std::ops::Deref for Consumed {
    type Target = Record;

    fn deref(&self) -> &Record {
        &self.record
    }
}

pub(crate) fn to_record(m: &BorrowedMessage<'_>) -> Consumed {
    let (headers, header_error) = crate::kafka::read_headers(m);
    Consumed {
        record: Record {
            topic: m.topic().to_string(),
            partition: m.partition(),
            offset: m.offset(),
            timestamp: m.timestamp().to_millis(),
            key: m.key().map(<[u8]>::to_vec),
            value: m.payload().map(<[u8]>::to_vec),
            headers,
            ..Default::default()
        },
        header_error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(of: &[(&str, i32, i64, i64)]) -> OffsetRanges {
        of.iter()
            .map(|&(t, p, first, next)| ((t.to_string(), p), (first, next)))
            .collect()
    }

    #[test]
    fn a_batch_read_in_order_commits_each_partition_from_its_first_record_past_its_last() {
        let read = [
            ("a", 0, 10),
            ("b", 1, 7),
            ("a", 0, 11),
            ("a", 0, 14),
            ("b", 1, 8),
        ];
        assert_eq!(
            offset_ranges(read.into_iter()),
            Ok(ranges(&[("a", 0, 10, 15), ("b", 1, 7, 9)]))
        );
    }

    /// A seek back during the read: committing (first, last + 1) would
    /// store 951 for records 1000..1002 and 950, so 951..1002 would be
    /// written again; or, with 1000 repeated, write it twice.
    #[test]
    fn a_batch_that_reads_a_partition_backwards_is_refused_with_where_it_began() {
        for (read, offset, after) in [
            (
                vec![("a", 0, 1000), ("a", 0, 1001), ("a", 0, 950), ("b", 0, 5)],
                950,
                1001,
            ),
            (vec![("a", 0, 1000), ("a", 0, 1000)], 1000, 1000),
        ] {
            let err = offset_ranges(read.into_iter()).unwrap_err();
            assert_eq!((err.topic.as_str(), err.partition), ("a", 0));
            assert_eq!((err.offset, err.after), (offset, after));
            assert_eq!(
                err.ranges[&("a".to_string(), 0)].0,
                1000,
                "read again from where it began"
            );
            if err.ranges.len() > 1 {
                // A partition first seen after the one read backwards is
                // read again too.
                assert_eq!(err.ranges[&("b".to_string(), 0)].0, 5);
            }
        }
    }
}
