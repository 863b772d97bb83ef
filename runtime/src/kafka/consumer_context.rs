//! Consumer contexts: the task consumer's (explicit start positions,
//! revocations held while a batch is in flight, lag metrics) and the log
//! reader's.

use std::sync::Arc;
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{Offset, TopicPartitionList};

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

/// Keeps newly assigned partitions paused until the task has moved them to
/// an explicit start position (the committed offset, or the beginning for a
/// partition the group has never committed; see
/// `task::consume::position_assigned`), so that `auto.offset.reset` only
/// ever fires for an out-of-range offset, which means data was lost and is
/// reported, never skipped. The committed offsets are read by the task, not
/// in the assignment callback: there the read waits on the group
/// coordinator that is waiting for the callback, and on Apache Kafka it
/// timed out.
pub struct TaskConsumerContext {
    pub events: tokio::sync::mpsc::UnboundedSender<ConsumerEvent>,
    pub connector: Arc<str>,
    pub task: u32,
    pub metrics: crate::metrics::Metrics,
    pub assigned: std::sync::Mutex<std::collections::BTreeSet<(String, i32)>>,
    /// The longest a batch may take to be written (with its retries):
    /// `max.poll.interval.ms`, the rebalance timeout, covers it.
    pub longest_batch: Duration,
    /// Revocations wait while the task holds records (see
    /// [`TaskConsumerContext::hold_revocations`]).
    revocations: std::sync::Mutex<Revocations>,
    /// Set when the task stops: what the consumer releases then is no
    /// rebalance.
    closing: std::sync::atomic::AtomicBool,
    /// Assigned and paused, not yet moved to their start position: nothing
    /// resumes them but the task's positioning.
    unpositioned: std::sync::Mutex<std::collections::BTreeSet<(String, i32)>>,
}

/// Partitions whose revocation waits for the batch in flight.
#[derive(Default)]
struct Revocations {
    holding: bool,
    deferred: Vec<(String, i32)>,
}

impl ClientContext for TaskConsumerContext {
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

impl ConsumerContext for TaskConsumerContext {
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
                // A placeholder start, never fetched from: the partitions
                // stay paused until the task moves them (no committed
                // offset is looked up, so no reset error either).
                if let Err(e) = tpl.set_all_offsets(Offset::Beginning) {
                    tracing::error!(connector = %self.connector, error = %e, "setting start positions failed");
                }
                self.unpositioned
                    .lock()
                    .expect("unpositioned lock")
                    .extend(partitions.iter().cloned());
                let result = if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                };
                if let Err(e) = result {
                    tracing::error!(connector = %self.connector, error = %e, "assigning partitions failed");
                }
                if let Err(e) = consumer.pause(tpl) {
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

impl TaskConsumerContext {
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
            longest_batch: Duration::ZERO,
            revocations: Default::default(),
            closing: Default::default(),
            unpositioned: Default::default(),
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

    /// Whether a revocation is waiting for the records held.
    pub fn revocation_waiting(&self) -> bool {
        !self
            .revocations
            .lock()
            .expect("revocations lock")
            .deferred
            .is_empty()
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

    /// `partitions` are at their start positions: they may be resumed.
    pub fn positioned(&self, partitions: &[(String, i32)]) {
        let mut unpositioned = self.unpositioned.lock().expect("unpositioned lock");
        for p in partitions {
            unpositioned.remove(p);
        }
    }

    /// `partitions` without those still waiting for their start position:
    /// what a resume after a pause may resume.
    pub fn resumable(&self, partitions: &TopicPartitionList) -> TopicPartitionList {
        let unpositioned = self.unpositioned.lock().expect("unpositioned lock");
        let mut out = TopicPartitionList::new();
        for e in partitions.elements() {
            if !unpositioned.contains(&(e.topic().to_string(), e.partition())) {
                out.add_partition(e.topic(), e.partition());
            }
        }
        out
    }

    fn revoked(&self, partitions: Vec<(String, i32)>, closing: bool) {
        self.positioned(&partitions);
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
}
