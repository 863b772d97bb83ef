//! The stream loop (Kafka to Kafka): consume a batch, transform, produce to
//! `output.topic`, commit the consumed offsets.
//!
//! Exactly once: the produced records and the consumed offsets go into one
//! Kafka transaction (`send_offsets_to_transaction` with the consumer's
//! group metadata), so the offsets move if and only if the output is
//! visible. A failed transaction is aborted and the consumer rewound to the
//! start of the batch, which is read again.
//!
//! While a transaction commits, the next batch is read, converted and
//! transformed, so the task is not idle for the commit's round trips; it
//! is produced once the commit is done (a producer has one transaction
//! open at a time). An abort rewinds both batches.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};
use sluice_sdk::{ConnectError, ErrorKind, Record};

use super::TaskEnv;
use super::consume::{
    ReleaseOnDrop, TaskConsumer, batch_ranges, close_consumer, commit, commit_before_writing,
    pause_consumer, position_assigned, read_batch, release_revocations, subscribe, task_consumer,
};
use super::produce::produce_batch;
use super::stages::{Converted, check_converters, schema_outputs, transform_all};
use crate::config::{DeliveryGuarantee, StreamConfig};
use crate::errors::{ErrorHandler, Failure, Retry, Stage};
use crate::kafka::transaction::{TransactionalProducer, TxnFailure};
use crate::kafka::{await_delivery, enqueue, send_now};

pub async fn run(
    mut env: TaskEnv,
    config: StreamConfig,
    errors: ErrorHandler,
) -> Result<(), ConnectError> {
    let (consumer, mut events_rx) = task_consumer(&env)?;
    let mut output = match env.common.delivery_guarantee {
        DeliveryGuarantee::ExactlyOnce => {
            Output::Transactional(Box::new(env.transactional_producer().await?))
        }
        _ => Output::Plain(env.producer()?),
    };
    subscribe(&env, &consumer)?;
    // A revocation waits for the batch in flight (see the sink loop);
    // however the task ends, nothing stays held.
    let _release_on_drop = ReleaseOnDrop(consumer.clone());
    let result = run_loop(
        &mut env,
        &config,
        &consumer,
        &mut output,
        &mut events_rx,
        &errors,
    )
    .await;
    close_consumer(&env, &consumer).await;
    result
}

enum Output {
    Plain(rdkafka::producer::FutureProducer),
    Transactional(Box<TransactionalProducer>),
}

/// A batch read, checked by the converters, transformed and routed:
/// ready to be written.
struct Prepared {
    converted: Converted,
    outputs: Vec<(usize, Record)>,
    /// Where each partition's batch starts (to rewind to).
    first: Positions,
    /// The next offset to read in each partition (to commit).
    next: Positions,
    started: Instant,
}

/// Reads the next batch and runs it through the converter stage, the chain
/// and the output schemas. `None`: no record came (the task is stopping,
/// nothing arrived in time, or `stop_waiting` completed first).
async fn prepare(
    env: &mut TaskEnv,
    config: &StreamConfig,
    consumer: &Arc<TaskConsumer>,
    errors: &ErrorHandler,
    stop_waiting: impl std::future::Future<Output = ()>,
) -> Result<Option<Prepared>, ConnectError> {
    let batch = read_batch(env, consumer, stop_waiting).await?;
    if batch.is_empty() {
        return Ok(None);
    }
    let started = Instant::now();
    let ranges = match batch_ranges(env, &batch) {
        Ok(ranges) => ranges,
        Err(read_backwards) => {
            let first = read_backwards
                .into_iter()
                .map(|(tp, (first, _))| (tp, first))
                .collect();
            rewind(consumer, &first, false).await?;
            return Ok(None);
        }
    };
    let (first, next) = ranges
        .into_iter()
        .map(|(tp, (first, next))| ((tp.clone(), first), (tp, next)))
        .unzip();
    let converted = check_converters(env, errors, batch).await?;
    let inputs = &converted.inputs;
    let mut outputs = transform_all(env, errors, inputs, converted.chain_inputs()).await?;
    // Routed first: a registry converter names its subject after the
    // topic the record is written to.
    for (_, r) in &mut outputs {
        r.topic = config.route(&r.topic);
        r.partition = -1;
        r.offset = -1;
    }
    let outputs =
        schema_outputs(env, errors, inputs, converted.chain_inputs(), outputs, true).await?;
    env.note_topics(outputs.iter().map(|(_, r)| r.topic.as_str()));
    Ok(Some(Prepared {
        converted,
        outputs,
        first,
        next,
        started,
    }))
}

async fn run_loop(
    env: &mut TaskEnv,
    config: &StreamConfig,
    consumer: &Arc<TaskConsumer>,
    output: &mut Output,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<crate::kafka::ConsumerEvent>,
    errors: &ErrorHandler,
) -> Result<(), ConnectError> {
    // Records dead-lettered inside a transaction that was then aborted:
    // read again after the rewind, they are not dead-lettered twice.
    let mut dead_lettered: BTreeSet<(String, i32, i64)> = BTreeSet::new();
    // Consecutive aborted transactions share one retry budget.
    let mut abort_retrier = None;
    // Exactly once, the next batch is read and transformed while the
    // current one's transaction commits (a producer has one transaction
    // open at a time, but the consumer and the chain need not wait for
    // it); it is written next, or read again if that commit failed.
    let mut prepared: Option<Prepared> = None;
    loop {
        let mut assigned = Vec::new();
        while let Ok(event) = events.try_recv() {
            tracing::debug!(?event, "rebalance");
            if let crate::kafka::ConsumerEvent::Assigned(partitions) = event {
                assigned.extend(partitions);
            }
        }
        if !assigned.is_empty() && !position_assigned(env, consumer, &assigned, true).await? {
            return Ok(());
        }
        if env.is_paused() {
            // Nothing stays held while paused: a revocation would wait
            // for the whole pause.
            if let Some(held) = prepared.take() {
                rewind(consumer, &held.first, false).await?;
                release_revocations(consumer).await;
            }
            if !pause_consumer(env, consumer).await {
                return Ok(());
            }
        }
        let batch = match prepared.take() {
            Some(batch) => batch,
            None => match prepare(env, config, consumer, errors, std::future::pending()).await? {
                Some(batch) => batch,
                None if env.cancel.is_cancelled() => return Ok(()),
                None => continue,
            },
        };
        let Prepared {
            converted,
            outputs,
            first,
            next,
            started,
        } = batch;
        let inputs = &converted.inputs;
        let produced = match output {
            Output::Plain(producer) => {
                let written =
                    write_plain(env, consumer, producer, errors, inputs, outputs, &next).await?;
                let Some(n) = written else {
                    return Ok(());
                };
                // Written: a revocation that waited for the batch goes
                // through.
                release_revocations(consumer).await;
                n
            }
            Output::Transactional(txn) => {
                // A revocation waiting for the records held gets them
                // after this commit: nothing more is read meanwhile.
                let overlap = !consumer.context().revocation_waiting();
                let committed = tokio::sync::Notify::new();
                let (outcome, following) = tokio::join!(
                    async {
                        let outcome = transact(
                            consumer,
                            txn,
                            errors,
                            inputs,
                            outputs,
                            &next,
                            &mut dead_lettered,
                        )
                        .await;
                        committed.notify_one();
                        outcome
                    },
                    async {
                        if overlap {
                            prepare(env, config, consumer, errors, committed.notified()).await
                        } else {
                            Ok(None)
                        }
                    },
                );
                match outcome {
                    Ok(Ok(n)) => {
                        abort_retrier = None;
                        // The transaction committed the offsets; the
                        // embedded broker does not store offsets sent in a
                        // transaction, so they are also committed plainly
                        // (the same offsets, harmless on a real cluster).
                        commit(env, consumer, &next).await;
                        dead_lettered
                            .retain(|(t, p, o)| next.get(&(t.clone(), *p)).is_none_or(|n| o >= n));
                        match following? {
                            // Still held, committed next (alone, if a
                            // revocation waits for it).
                            Some(held) => prepared = Some(held),
                            None => release_revocations(consumer).await,
                        }
                        n
                    }
                    Ok(Err(Redo {
                        cause,
                        settled_by_broker,
                    })) => {
                        let retrier = abort_retrier
                            .get_or_insert_with(|| errors.retrier(Stage::KafkaProduce, true));
                        match retrier
                            .after(cause, "committing the stream's transaction")
                            .await
                        {
                            Retry::Again => {}
                            Retry::Stopped => return Ok(()),
                            Retry::Failed(e) => return Err(e),
                        }
                        // The batch read meanwhile comes after this one:
                        // both are read again.
                        let mut from = first;
                        if let Ok(Some(held)) = &following {
                            for (partition, offset) in &held.first {
                                from.entry(partition.clone()).or_insert(*offset);
                            }
                        }
                        rewind(consumer, &from, settled_by_broker).await?;
                        release_revocations(consumer).await;
                        continue;
                    }
                    Err(_) if env.cancel.is_cancelled() => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        };
        env.count("produce", "ok", produced);
        env.observe_batch_time(started);
        if env.cancel.is_cancelled() {
            return Ok(());
        }
    }
}

/// Per partition: where the batch starts (to rewind to), or the next
/// offset to read (to commit).
type Positions = BTreeMap<(String, i32), i64>;

/// At-most-once or at-least-once: offsets committed before or after the
/// batch is produced. `None`: stopping.
async fn write_plain(
    env: &TaskEnv,
    consumer: &Arc<TaskConsumer>,
    producer: &rdkafka::producer::FutureProducer,
    errors: &ErrorHandler,
    inputs: &[sluice_sdk::Record],
    outputs: Vec<(usize, sluice_sdk::Record)>,
    next: &Positions,
) -> Result<Option<usize>, ConnectError> {
    if env.common.delivery_guarantee == DeliveryGuarantee::AtMostOnce {
        commit_before_writing(env, consumer, errors, next).await?;
    }
    let Some(n) = produce_batch(producer, errors, inputs, outputs).await? else {
        return Ok(None);
    };
    if env.common.delivery_guarantee == DeliveryGuarantee::AtLeastOnce {
        commit(env, consumer, next).await;
    }
    Ok(Some(n))
}

/// A transaction that did not commit.
struct Redo {
    cause: ConnectError,
    /// The outcome was unknown: resume from the group's committed offsets
    /// rather than the start of the batch.
    settled_by_broker: bool,
}

/// One transaction for the batch: produce, add the consumed offsets,
/// commit. Returns how many records were produced, or why the transaction
/// did not commit (the caller rewinds and reads the batch again).
#[allow(clippy::too_many_arguments)]
async fn transact(
    consumer: &Arc<TaskConsumer>,
    txn: &mut TransactionalProducer,
    errors: &ErrorHandler,
    inputs: &[Record],
    outputs: Vec<(usize, Record)>,
    next: &BTreeMap<(String, i32), i64>,
    dead_lettered: &mut BTreeSet<(String, i32, i64)>,
) -> Result<Result<usize, Redo>, ConnectError> {
    let origin_id = |i: usize| -> (String, i32, i64) {
        (
            inputs[i].topic.clone(),
            inputs[i].partition,
            inputs[i].offset,
        )
    };
    let outputs: Vec<(usize, Record)> = outputs
        .into_iter()
        .filter(|(i, _)| !dead_lettered.contains(&origin_id(*i)))
        .collect();
    txn.begin().map_err(TxnFailure::into_error)?;
    let mut deliveries = Vec::with_capacity(outputs.len());
    for (_, r) in &outputs {
        deliveries.push(enqueue(txn.producer(), r).await);
    }
    send_now(txn.producer());
    let mut cause = None;
    for ((origin, r), delivery) in outputs.iter().zip(deliveries) {
        match await_delivery(&r.topic, delivery).await {
            Ok(()) => {}
            Err(e) if e.kind == ErrorKind::Data => {
                errors
                    .tolerate_or_fail(Failure {
                        record: Some(&inputs[*origin]),
                        stage: Stage::KafkaProduce,
                        component: "kafka-producer",
                        error: &e,
                        attempts: 1,
                    })
                    .await?;
                dead_lettered.insert(origin_id(*origin));
                cause.get_or_insert(e);
            }
            Err(e) => {
                cause.get_or_insert(e);
            }
        }
    }
    let outcome = if let Some(fatal) = txn.fatal_state() {
        Err(TxnFailure::Fatal(fatal))
    } else if let Some(cause) = cause {
        Err(txn.abort(cause).await)
    } else {
        match consumer.group_metadata() {
            None => Err(txn
                .abort(ConnectError::retriable(
                    "the consumer has no group metadata yet",
                ))
                .await),
            Some(group) => {
                let mut tpl = TopicPartitionList::with_capacity(next.len());
                for ((topic, partition), offset) in next {
                    let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset));
                }
                match txn.send_offsets(tpl, group).await {
                    Ok(()) => txn.commit().await,
                    Err(failure) => Err(failure),
                }
            }
        }
    };
    match outcome {
        Ok(()) => Ok(Ok(outputs.len())),
        Err(TxnFailure::Fatal(e)) => Err(e),
        Err(TxnFailure::Aborted(e)) => Ok(Err(Redo {
            cause: e,
            settled_by_broker: false,
        })),
        // The new producer made the broker commit or abort it: the group's
        // committed offsets say which.
        Err(TxnFailure::Ambiguous(e)) => Ok(Err(Redo {
            cause: e,
            settled_by_broker: true,
        })),
    }
}

/// Moves each partition of the batch back to where the batch started (or,
/// `to_committed`, to the group's committed offset), so the next poll
/// reads it again. A partition revoked meanwhile is skipped: its new owner
/// starts from the committed offset.
async fn rewind(
    consumer: &Arc<TaskConsumer>,
    first: &BTreeMap<(String, i32), i64>,
    to_committed: bool,
) -> Result<(), ConnectError> {
    let consumer = consumer.clone();
    let first = first.clone();
    tokio::task::spawn_blocking(move || {
        let owned = consumer.assignment().unwrap_or_default();
        let mut tpl = TopicPartitionList::new();
        for ((topic, partition), offset) in &first {
            if owned.find_partition(topic, *partition).is_some() {
                let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset));
            }
        }
        if to_committed && tpl.count() > 0 {
            let committed = consumer.committed_offsets(tpl.clone(), Duration::from_secs(30))?;
            for e in committed.elements() {
                if let Offset::Offset(o) = e.offset() {
                    let _ = tpl.set_partition_offset(e.topic(), e.partition(), Offset::Offset(o));
                }
            }
        }
        if tpl.count() == 0 {
            return Ok(());
        }
        let done = consumer.seek_partitions(tpl, Duration::from_secs(30))?;
        match done.elements().iter().find_map(|e| e.error().err()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })
    .await
    .map_err(|e| ConnectError::fatal(format!("rewinding thread failed: {e}")))?
    .map_err(|e| {
        ConnectError::fatal("rewinding the consumer after an aborted transaction").with_source(e)
    })
}
