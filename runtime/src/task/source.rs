//! The source loop: poll, transform, produce, then commit the batch's
//! source offsets.
//!
//! At least once: the offsets are written only after every record of the
//! batch has a successful delivery report. At most once: before the records
//! are produced. Exactly once: the records and the offsets (in the offsets
//! topic) are written in one Kafka transaction per `transaction.boundary`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::producer::{DeliveryFuture, FutureProducer};
use sluice_sdk::connector::source_partition_key;
use sluice_sdk::{ConnectError, ErrorKind, Record, SourceOffsets, SourceTask};

use super::TaskEnv;
use super::produce::produce_batch;
use super::stages::{schema_outputs, transform_all};
use crate::config::{DeliveryGuarantee, TransactionBoundary};
use crate::errors::{ErrorHandler, Failure, Retry, Stage, retry_infrastructure};
use crate::kafka::transaction::{TransactionalProducer, TxnFailure};
use crate::kafka::{KafkaClients, await_delivery, enqueue, produce_each, send_now};
use crate::metrics::LATENCY_HEADER;
use crate::offsets::{OffsetChange, OffsetStore};

/// Whether a source connector keeps its offsets in the offsets topic:
/// always when exactly-once (they are written in its transactions), and
/// unless the standalone worker has an offsets file.
pub fn uses_offsets_topic(guarantee: DeliveryGuarantee, store: &OffsetStore) -> bool {
    guarantee == DeliveryGuarantee::ExactlyOnce || !store.is_persistent()
}

/// What a source task starts from.
pub struct SourceStart {
    /// The offsets to resume from.
    pub offsets: SourceOffsets,
    /// Exactly once, the task's transactional producer (for [`run`]).
    pub producer: Option<TransactionalProducer>,
}

/// Prepares a source task's start. Exactly once, its transactional producer
/// starts before the offsets are read: that fences the task's predecessor
/// and ends the transaction it left (completing a commit it had begun), so
/// the offsets read next hold everything it committed and nothing it did
/// not. Read first, a transaction whose commit was under way would be
/// missed, and its records written again.
///
/// A retriable failure (an offsets topic whose leader is not elected yet,
/// a transaction coordinator still loading) is retried within the
/// infrastructure budget, as a poll is. `None`: the task was stopped
/// meanwhile.
pub async fn start(
    env: &TaskEnv,
    store: &OffsetStore,
    errors: &ErrorHandler,
) -> Result<Option<SourceStart>, ConnectError> {
    retry_infrastructure!(
        errors,
        Stage::KafkaConsume,
        "starting the source task (its producer and offsets)",
        start_once(env, store).await
    )
}

async fn start_once(env: &TaskEnv, store: &OffsetStore) -> Result<SourceStart, ConnectError> {
    let producer = if env.common.delivery_guarantee == DeliveryGuarantee::ExactlyOnce {
        Some(env.transactional_producer().await?)
    } else {
        None
    };
    let from_topic = uses_offsets_topic(env.common.delivery_guarantee, store);
    let offsets = start_offsets(&env.clients, store, &env.connector, from_topic).await?;
    Ok(SourceStart { offsets, producer })
}

/// Where a starting source task resumes: the offsets topic (committed
/// records only) when the connector uses it, else the offsets file.
async fn start_offsets(
    clients: &KafkaClients,
    store: &OffsetStore,
    connector: &str,
    from_topic: bool,
) -> Result<SourceOffsets, ConnectError> {
    if !from_topic {
        return Ok(store.load(connector));
    }
    let read = clients
        .offsets_topic()
        .read(clients, connector)
        .await
        .map_err(|e| {
            ConnectError::retriable(format!("reading the source offsets: {e:#}"))
                .with_class("OffsetsUnavailable")
        })?;
    store
        .replace(connector, read.clone())
        .map_err(|e| ConnectError::fatal("keeping source offsets").with_source(e))?;
    Ok(read)
}

pub async fn run(
    mut env: TaskEnv,
    mut task: Box<dyn SourceTask>,
    transactional: Option<TransactionalProducer>,
    offsets: Arc<OffsetStore>,
    errors: ErrorHandler,
) -> Result<(), ConnectError> {
    let result = if let Some(mut txn) = transactional {
        run_exactly_once(&mut env, task.as_mut(), &mut txn, &offsets, &errors).await
    } else {
        let producer = env.producer()?;
        let to_topic = uses_offsets_topic(env.common.delivery_guarantee, &offsets);
        run_loop(
            &mut env,
            task.as_mut(),
            &producer,
            &offsets,
            to_topic,
            &errors,
        )
        .await
    };
    env.forget_gauges(task.gauges());
    task.stop().await;
    result
}

/// A polled and transformed batch.
struct Polled {
    inputs: Vec<Record>,
    /// Each output with the index of its input.
    outputs: Vec<(usize, Record)>,
    /// The last offset of each source partition in the batch.
    offsets: Vec<OffsetChange>,
    started: Instant,
}

enum Next {
    Batch(Polled),
    /// Nothing this time (an empty poll, or a poll that failed on bad data).
    Nothing,
    /// The task is being stopped.
    Stop,
    /// The source has no more records: the task stays RUNNING, idle, as
    /// Kafka Connect tasks do, until it is stopped.
    Exhausted,
}

/// Polls once (retrying infrastructure failures) and transforms the batch.
async fn poll_batch(
    env: &mut TaskEnv,
    task: &mut dyn SourceTask,
    errors: &ErrorHandler,
) -> Result<Next, ConnectError> {
    let class = env.common.connector_class.clone();
    let cancel = env.cancel.clone();
    let polled: Result<_, ConnectError> = retry_infrastructure!(
        errors,
        Stage::TaskPoll,
        "polling the source",
        tokio::select! {
            biased;
            _ = cancel.cancelled() => Err(ConnectError::retriable("the task is stopping")),
            polled = task.poll() => polled,
        }
    );
    env.export_gauges(task.gauges());
    let batch = match polled {
        Ok(None) => return Ok(Next::Stop),
        Ok(Some(None)) => {
            tracing::info!("source has no more records");
            return Ok(Next::Exhausted);
        }
        Ok(Some(Some(batch))) if batch.is_empty() => return Ok(Next::Nothing),
        Ok(Some(Some(batch))) => batch,
        Err(e) if e.kind == ErrorKind::Retriable => return Err(e),
        Err(e) => {
            // A poll that failed on bad data: no record to keep, but the
            // failure is recorded like any other.
            errors
                .tolerate_or_fail(Failure {
                    record: None,
                    stage: Stage::TaskPoll,
                    component: &class,
                    error: &e,
                    attempts: 1,
                })
                .await?;
            return Ok(Next::Nothing);
        }
    };
    env.swap_chain_if_updated().await;
    let started = Instant::now();
    env.count("poll", "ok", batch.len());
    env.observe_batch(batch.len());
    let mut last: std::collections::HashMap<String, serde_json::Value> =
        std::collections::HashMap::new();
    // A null offset is Kafka Connect's "nothing to resume from" (e.g. a
    // JDBC source's bulk mode): no offset is written for it.
    for r in batch.iter().filter(|r| !r.source_offset.is_null()) {
        last.insert(
            source_partition_key(&r.source_partition),
            r.source_offset.clone(),
        );
    }
    let inputs: Vec<Record> = batch.iter().map(|r| r.to_record()).collect();
    let outputs = transform_all(env, errors, &inputs, &inputs).await?;
    // With schemas, keys and values are written as envelopes.
    let mut outputs = schema_outputs(env, errors, &inputs, &inputs, outputs, true).await?;
    // Stamp the time the record entered the pipeline, unless a transform
    // or the source already did, for end-to-end latency at the sinks.
    let now = chrono::Utc::now().timestamp_millis().to_be_bytes().to_vec();
    for (_, r) in &mut outputs {
        if !r.has_header(LATENCY_HEADER) {
            r.add_header(LATENCY_HEADER, Some(now.clone()));
        }
    }
    let topics: Vec<String> = outputs.iter().map(|(_, r)| r.topic.clone()).collect();
    let created: Result<_, ConnectError> = retry_infrastructure!(
        errors,
        Stage::KafkaProduce,
        "creating the topics the source writes",
        env.ensure_topics(topics.iter().map(String::as_str)).await
    );
    if created?.is_none() {
        return Ok(Next::Stop);
    }
    env.note_topics(outputs.iter().map(|(_, r)| r.topic.as_str()));
    Ok(Next::Batch(Polled {
        inputs,
        outputs,
        offsets: last.into_iter().map(|(k, v)| (k, Some(v))).collect(),
        started,
    }))
}

fn observe_commit(env: &TaskEnv, started: Instant) {
    env.observe_batch_time(started);
}

/// At-least-once and at-most-once.
async fn run_loop(
    env: &mut TaskEnv,
    task: &mut dyn SourceTask,
    producer: &FutureProducer,
    offsets: &OffsetStore,
    to_topic: bool,
    errors: &ErrorHandler,
) -> Result<(), ConnectError> {
    let at_most_once = env.common.delivery_guarantee == DeliveryGuarantee::AtMostOnce;
    loop {
        if env.is_paused() && !env.wait_while_paused().await {
            return Ok(());
        }
        let batch = match poll_batch(env, task, errors).await? {
            Next::Stop => return Ok(()),
            Next::Exhausted => {
                env.cancel.cancelled().await;
                return Ok(());
            }
            Next::Nothing => continue,
            Next::Batch(b) => b,
        };
        if at_most_once {
            // The offsets go first: a crash from here on loses the batch
            // rather than repeating it.
            if !write_offsets(env, producer, offsets, to_topic, errors, &batch.offsets).await? {
                return Ok(());
            }
        }
        let produced = match produce_batch(producer, errors, &batch.inputs, batch.outputs).await? {
            Some(n) => n,
            None => return Ok(()),
        };
        env.count("produce", "ok", produced);
        if !at_most_once {
            // Every record of the batch is in Kafka or dead-lettered: its
            // offsets may move.
            if !write_offsets(env, producer, offsets, to_topic, errors, &batch.offsets).await? {
                return Ok(());
            }
        }
        task.commit().await?;
        observe_commit(env, batch.started);
    }
}

/// Makes a batch's offsets durable: in the offsets topic (acknowledged by
/// Kafka) or the offsets file. Returns false if the task was stopped while
/// Kafka was unavailable.
async fn write_offsets(
    env: &TaskEnv,
    producer: &FutureProducer,
    store: &OffsetStore,
    to_topic: bool,
    errors: &ErrorHandler,
    changes: &[OffsetChange],
) -> Result<bool, ConnectError> {
    if to_topic {
        let records = env.clients.offsets_topic().records(&env.connector, changes);
        let written: Result<_, ConnectError> = retry_infrastructure!(
            errors,
            Stage::KafkaProduce,
            "writing source offsets to the offsets topic",
            produce_each(producer, &records)
                .await
                .into_iter()
                .collect::<Result<Vec<()>, _>>()
        );
        if written?.is_none() {
            return Ok(false);
        }
    }
    let updates: SourceOffsets = changes
        .iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.clone(), v)))
        .collect();
    store
        .commit(&env.connector, updates)
        .map_err(|e| ConnectError::fatal("writing source offsets").with_source(e))?;
    Ok(true)
}

/// The records and offsets of the open transaction, kept until it commits
/// so that an aborted transaction can be redone.
#[derive(Default)]
struct OpenTransaction {
    inputs: Vec<Record>,
    outputs: Vec<(usize, Record)>,
    deliveries: Vec<Result<DeliveryFuture, ConnectError>>,
    offsets: std::collections::BTreeMap<String, Option<serde_json::Value>>,
    opened: Option<Instant>,
    first_batch: Option<Instant>,
}

impl OpenTransaction {
    fn is_open(&self) -> bool {
        self.opened.is_some()
    }

    async fn add(&mut self, producer: &FutureProducer, batch: Polled) {
        let base = self.inputs.len();
        self.inputs.extend(batch.inputs);
        for (origin, record) in batch.outputs {
            self.deliveries.push(enqueue(producer, &record).await);
            self.outputs.push((base + origin, record));
        }
        self.offsets.extend(batch.offsets);
        self.first_batch.get_or_insert(batch.started);
    }

    fn offset_changes(&self) -> Vec<OffsetChange> {
        self.offsets
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Exactly-once: records and their source offsets in one transaction per
/// `transaction.boundary`. An aborted transaction is redone from the
/// records kept in memory (the same as resuming from the last committed
/// offsets, without polling the source again); a commit with an unknown
/// outcome is settled by reading the offsets topic.
async fn run_exactly_once(
    env: &mut TaskEnv,
    task: &mut dyn SourceTask,
    txn: &mut TransactionalProducer,
    offsets: &OffsetStore,
    errors: &ErrorHandler,
) -> Result<(), ConnectError> {
    let interval = match env.common.transaction_boundary {
        TransactionBoundary::Interval => Some(
            env.common
                .transaction_boundary_interval_ms
                .map(Duration::from_millis)
                .unwrap_or_else(|| env.clients.offset_flush_interval()),
        ),
        TransactionBoundary::Poll | TransactionBoundary::Connector => None,
    };
    let mut open = OpenTransaction::default();
    let mut exhausted = false;
    loop {
        let due = open.opened.is_some_and(|t| match interval {
            None => true,
            Some(i) => t.elapsed() >= i,
        });
        let stopping = env.cancel.is_cancelled() || env.is_paused() || exhausted;
        if open.is_open() && (due || stopping) {
            match commit_open(env, task, txn, offsets, errors, &mut open).await {
                Ok(()) => {}
                Err(_) if env.cancel.is_cancelled() => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        if exhausted {
            env.cancel.cancelled().await;
            return Ok(());
        }
        if env.is_paused() && !env.wait_while_paused().await {
            return Ok(());
        }
        let batch = match poll_batch(env, task, errors).await? {
            Next::Stop if open.is_open() => continue,
            Next::Stop => return Ok(()),
            Next::Exhausted => {
                exhausted = true;
                continue;
            }
            Next::Nothing => continue,
            Next::Batch(b) => b,
        };
        if !open.is_open() {
            txn.begin().map_err(TxnFailure::into_error)?;
            open.opened = Some(Instant::now());
        }
        open.add(txn.producer(), batch).await;
    }
}

/// Commits the open transaction: waits for the records' delivery, adds the
/// offsets, commits. Dead-letters what Kafka refuses for what it is,
/// redoes the transaction after an abort (within the infrastructure retry
/// budget), and fails the task when fenced.
async fn commit_open(
    env: &TaskEnv,
    task: &mut dyn SourceTask,
    txn: &mut TransactionalProducer,
    offsets: &OffsetStore,
    errors: &ErrorHandler,
    open: &mut OpenTransaction,
) -> Result<(), ConnectError> {
    let changes = open.offset_changes();
    let offset_records = env
        .clients
        .offsets_topic()
        .records(&env.connector, &changes);
    let mut retrier = errors.retrier(Stage::KafkaProduce, true);
    loop {
        let outcome = attempt_commit(env, txn, errors, open, &offset_records).await?;
        let failure = match outcome {
            Ok(()) => break,
            Err(TxnFailure::Fatal(e)) => return Err(e),
            Err(TxnFailure::Ambiguous(e)) => {
                if committed_in_topic(env, &changes).await {
                    tracing::info!("the offsets topic shows the transaction committed");
                    break;
                }
                e
            }
            Err(TxnFailure::Aborted(e)) => e,
        };
        match retrier
            .after(failure, "committing the source transaction")
            .await
        {
            Retry::Again => {}
            Retry::Stopped => {
                return Err(ConnectError::retriable(
                    "stopped before the source transaction committed; it is redone from the stored offsets",
                ));
            }
            Retry::Failed(e) => return Err(e),
        }
        // Redo: the same records (those dead-lettered aside) in a new
        // transaction.
        txn.begin().map_err(TxnFailure::into_error)?;
        open.deliveries.clear();
        for (_, record) in &open.outputs {
            open.deliveries.push(enqueue(txn.producer(), record).await);
        }
    }
    env.count("produce", "ok", open.outputs.len());
    let updates: SourceOffsets = changes
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    offsets
        .commit(&env.connector, updates)
        .map_err(|e| ConnectError::fatal("keeping source offsets").with_source(e))?;
    task.commit().await?;
    if let Some(started) = open.first_batch {
        observe_commit(env, started);
    }
    *open = OpenTransaction::default();
    Ok(())
}

/// One try at committing the open transaction. The outer error fails the
/// task (the error handler refused a dead letter); the inner one says how
/// the transaction ended.
async fn attempt_commit(
    env: &TaskEnv,
    txn: &mut TransactionalProducer,
    errors: &ErrorHandler,
    open: &mut OpenTransaction,
    offset_records: &[Record],
) -> Result<Result<(), TxnFailure>, ConnectError> {
    // The offsets go out now, in the records' linger window rather than one
    // of their own after the records' delivery: the transaction holds both,
    // so any failure below aborts them together.
    let mut offset_deliveries = Vec::with_capacity(offset_records.len());
    for r in offset_records {
        offset_deliveries.push(enqueue(txn.producer(), r).await);
    }
    send_now(txn.producer());
    let deliveries = std::mem::take(&mut open.deliveries);
    let mut cause = None;
    let mut refused = std::collections::BTreeSet::new();
    for (i, delivery) in deliveries.into_iter().enumerate() {
        let result = await_delivery(&open.outputs[i].1.topic, delivery).await;
        match result {
            Ok(()) => {}
            Err(e) if e.kind == ErrorKind::Data => {
                errors
                    .tolerate_or_fail(Failure {
                        record: Some(&open.inputs[open.outputs[i].0]),
                        stage: Stage::KafkaProduce,
                        component: "kafka-producer",
                        error: &e,
                        attempts: 1,
                    })
                    .await?;
                refused.insert(i);
                cause.get_or_insert(e);
            }
            Err(e) => {
                cause.get_or_insert(e);
            }
        }
    }
    if !refused.is_empty() {
        let mut i = 0;
        open.outputs.retain(|_| {
            i += 1;
            !refused.contains(&(i - 1))
        });
    }
    if let Some(fatal) = txn.fatal_state() {
        return Ok(Err(TxnFailure::Fatal(fatal)));
    }
    if let Some(cause) = cause {
        // Any failed delivery leaves the transaction abortable.
        return Ok(Err(txn.abort(cause).await));
    }
    let mut offsets_written = None;
    for (r, delivery) in offset_records.iter().zip(offset_deliveries) {
        if let Err(e) = await_delivery(&r.topic, delivery).await {
            offsets_written.get_or_insert(e);
        }
    }
    if let Some(e) = offsets_written {
        if let Some(fatal) = txn.fatal_state() {
            return Ok(Err(TxnFailure::Fatal(fatal)));
        }
        let cause = ConnectError::retriable(format!(
            "writing source offsets to `{}`",
            env.clients.offsets_topic().name
        ))
        .with_source(e);
        return Ok(Err(txn.abort(cause).await));
    }
    Ok(txn.commit().await)
}

/// After a commit with an unknown outcome: do the committed records of the
/// offsets topic hold this transaction's offsets?
async fn committed_in_topic(env: &TaskEnv, changes: &[OffsetChange]) -> bool {
    let read = env
        .clients
        .offsets_topic()
        .read(&env.clients, &env.connector)
        .await;
    match read {
        Ok(stored) => changes.iter().all(|(k, v)| stored.get(k) == v.as_ref()),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "could not read the offsets topic; redoing the transaction");
            false
        }
    }
}
