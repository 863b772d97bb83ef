//! The sink loop: consume a batch, transform, `put`, `flush`, then commit the
//! consumed offsets to Kafka, never before the sink has the records. The
//! next batch is read and transformed while one is written.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::Consumer;
use rdkafka::{Message, Offset, TopicPartitionList};
use sluice_sdk::{CommitOffset, ConnectError, ErrorKind, Record, SinkTask};
use tracing::Instrument;

use super::TaskEnv;
use super::consume::*;
use super::stages::*;
use crate::config::DeliveryGuarantee;
use crate::errors::{
    ErrorHandler, Failure, Retry, Stage, infrastructure_exhausted, retry_infrastructure,
};
use crate::kafka::{ConsumerEvent, is_offset_out_of_range};
use crate::metrics::LATENCY_HEADER;

pub async fn run(
    mut env: TaskEnv,
    mut task: Box<dyn SinkTask>,
    errors: ErrorHandler,
) -> Result<(), ConnectError> {
    // Opening the sink (a database connection) is retried like any
    // infrastructure failure.
    let started: Result<_, ConnectError> = retry_infrastructure!(
        errors,
        Stage::TaskPut,
        "starting the sink",
        task.start().await
    );
    if started?.is_none() {
        tracing::info!("stopped while the sink was unavailable");
        return Ok(());
    }
    let exactly_once = env.common.delivery_guarantee == DeliveryGuarantee::ExactlyOnce;
    if exactly_once && !task.supports_exactly_once() {
        return Err(ConnectError::fatal(format!(
            "delivery.guarantee=exactly-once, but `{}` tasks cannot store offsets with their data",
            env.common.connector_class
        )));
    }
    let (consumer, mut events_rx) = task_consumer(&env)?;
    subscribe(&env, &consumer)?;
    // However the task ends (even dropped mid-batch when aborted), nothing
    // is held once it does: a revocation that waited, or the consumer's
    // own on close, goes through.
    let _release_on_drop = ReleaseOnDrop(consumer.clone());
    let result = run_loop(&mut env, task.as_mut(), &consumer, &mut events_rx, &errors).await;
    close_consumer(&env, &consumer).await;
    task.stop().await;
    result
}

/// A batch still being written after this long pauses the task's
/// partitions, and the consumer goes on polling (see
/// [`write_with_backpressure`]).
const BACKPRESSURE_AFTER: Duration = Duration::from_secs(1);

/// What became of a batch's write.
enum WriteEnd {
    /// Written (and, exactly once, committed): how many records.
    Written(usize),
    /// The task is stopping; what was not committed is read again.
    Stop,
    /// Exactly once, another task's commit fenced this one: the batch is
    /// dropped and read again from the offsets stored in the sink.
    Fenced {
        offsets: Vec<CommitOffset>,
        error: ConnectError,
    },
}

/// A batch read, converted and transformed, ready to be written.
struct Prepared {
    converted: Converted,
    outputs: Vec<(usize, Record)>,
    /// Per partition: the batch's first offset and the next one to read.
    range: OffsetRanges,
    /// When each written record entered the pipeline, by its input topic.
    stamps: Vec<(String, i64)>,
    started: Instant,
}

impl Prepared {
    fn next(&self) -> BTreeMap<(String, i32), i64> {
        self.range
            .iter()
            .map(|(tp, &(_, next))| (tp.clone(), next))
            .collect()
    }

    fn offsets(&self) -> Vec<CommitOffset> {
        self.range
            .iter()
            .map(|((topic, partition), &(first, next))| CommitOffset {
                topic: topic.clone(),
                partition: *partition,
                first,
                next,
            })
            .collect()
    }
}

async fn run_loop(
    env: &mut TaskEnv,
    task: &mut dyn SinkTask,
    consumer: &Arc<TaskConsumer>,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<ConsumerEvent>,
    errors: &ErrorHandler,
) -> Result<(), ConnectError> {
    let guarantee = env.common.delivery_guarantee;
    let class = env.common.connector_class.clone();
    let metrics = env.metrics.clone();
    let labels = env.labels();
    // The next batch is read, converted and transformed while the current
    // one is written (the sink's statements and commit are the database's
    // time, the chain is this task's): it is written next, or read again
    // if the task stops or its write is fenced.
    let mut prepared: Option<Prepared> = None;
    loop {
        let mut assigned = Vec::new();
        while let Ok(event) = events.try_recv() {
            tracing::debug!(?event, "rebalance");
            if let ConsumerEvent::Assigned(partitions) = event {
                assigned.extend(partitions);
            }
        }
        if !assigned.is_empty() {
            let exactly_once = guarantee == DeliveryGuarantee::ExactlyOnce;
            if !position_assigned(env, consumer, &assigned, !exactly_once).await? {
                return Ok(());
            }
            if exactly_once {
                match restore_positions(env, task, consumer, errors, assigned).await {
                    Ok(()) => {}
                    Err(_) if env.cancel.is_cancelled() => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        }
        if env.is_paused() {
            // Nothing stays held while paused: a revocation would wait
            // for the whole pause.
            if let Some(held) = prepared.take() {
                read_again(consumer, &held.range).await?;
                release_revocations(consumer).await;
            }
            if !pause_consumer(env, consumer).await {
                return Ok(());
            }
        }
        let batch = match prepared.take() {
            Some(batch) => batch,
            None => match prepare(env, consumer, errors, std::future::pending()).await? {
                Some(batch) => batch,
                None => {
                    release_revocations(consumer).await;
                    if env.cancel.is_cancelled() {
                        return Ok(());
                    }
                    continue;
                }
            },
        };
        if guarantee == DeliveryGuarantee::AtMostOnce {
            // The offsets go first: a crash from here on loses the batch
            // rather than repeating it.
            commit_before_writing(env, consumer, errors, &batch.next()).await?;
        }
        // A revocation waiting for the records held gets them after this
        // batch: nothing more is read meanwhile.
        let overlap = !consumer.context().revocation_waiting();
        let written = tokio::sync::Notify::new();
        let cancel = env.cancel.clone();
        let ((outcome, data_lost), following) = tokio::join!(
            async {
                let started = Instant::now();
                let outcome = write_with_backpressure(
                    consumer,
                    &metrics,
                    &labels,
                    write(task, errors, &class, guarantee, &cancel, &batch),
                )
                .instrument(tracing::debug_span!("sink_write"))
                .await;
                metrics
                    .sink_put_seconds
                    .with_label_values(&[labels[0].as_str(), labels[1].as_str()])
                    .observe(started.elapsed().as_secs_f64());
                written.notify_one();
                outcome
            },
            async {
                if overlap {
                    prepare(env, consumer, errors, written.notified()).await
                } else {
                    Ok(None)
                }
            },
        );
        let end = match outcome {
            Ok(end) => end,
            Err(e) => {
                release_revocations(consumer).await;
                return Err(e);
            }
        };
        let held = match end {
            WriteEnd::Written(n) => {
                finish(env, consumer, guarantee, &batch, n)
                    .instrument(tracing::debug_span!("sink_finish"))
                    .await;
                // The partitions whose revocation waited for the batch are
                // released, unless the next batch is held: it goes first.
                match following {
                    Ok(Some(held)) => Some(held),
                    following => {
                        release_revocations(consumer).await;
                        following?;
                        None
                    }
                }
            }
            WriteEnd::Stop => {
                release_revocations(consumer).await;
                return Ok(());
            }
            WriteEnd::Fenced { offsets, error } => {
                tracing::warn!(connector = %env.connector, task = env.task_id, error = %error.full_message(), "exactly-once commit fenced; the batch is dropped and read again from the offsets stored in the sink");
                // What was read meanwhile comes after the batch: read again.
                if let Ok(Some(held)) = &following {
                    read_again(consumer, &held.range).await?;
                }
                rewind(task, consumer, errors, &offsets).await?;
                release_revocations(consumer).await;
                None
            }
        };
        if data_lost {
            return Err(data_loss(env, consumer).await);
        }
        if env.cancel.is_cancelled() {
            return Ok(());
        }
        prepared = held;
    }
}

/// Moves each partition back to where `range` starts, so the next poll
/// reads it again (a partition revoked meanwhile is skipped: its new owner
/// starts from the committed offset).
async fn read_again(
    consumer: &Arc<TaskConsumer>,
    range: &OffsetRanges,
) -> Result<(), ConnectError> {
    let first = range
        .iter()
        .map(|((topic, partition), &(first, _))| (topic.clone(), *partition, first))
        .collect();
    seek_owned(
        consumer,
        first,
        "moving the consumer back to a batch read ahead",
    )
    .await
}

/// Seeks each partition to its offset, those the task still owns (one
/// revoked meanwhile starts from the committed offset at its new owner).
/// `what` names the move in the error.
async fn seek_owned(
    consumer: &Arc<TaskConsumer>,
    positions: Vec<(String, i32, i64)>,
    what: &'static str,
) -> Result<(), ConnectError> {
    let c = consumer.clone();
    tokio::task::spawn_blocking(move || {
        let owned = c.assignment()?;
        let mut seek = TopicPartitionList::new();
        for (topic, partition, offset) in &positions {
            if owned.find_partition(topic, *partition).is_some() {
                seek.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
            }
        }
        if seek.count() > 0 {
            // A timeout fails the call (and the task). An error on one
            // partition only says it stopped being fetched (librdkafka
            // answers `_STATE` or `_PREV_IN_PROGRESS` to a seek of a
            // partition being unassigned): revoked since `assignment`, it
            // is its new owner's to read from the stored offset.
            c.seek_partitions(seek, Duration::from_secs(30))?;
        }
        Ok::<_, rdkafka::error::KafkaError>(())
    })
    .await
    .map_err(|e| ConnectError::fatal(format!("seeking thread failed: {e}")))?
    .map_err(|e| ConnectError::fatal(what).with_source(e))
}

/// Drives `work` (a batch being written); if it takes longer than
/// [`BACKPRESSURE_AFTER`], every assigned partition is paused and the
/// consumer keeps polling, so the member serves its group (rebalances
/// included) and never exceeds `max.poll.interval.ms`, however slow the
/// sink. A record fetched meanwhile is sought back and its partition paused
/// too; all are resumed once the batch is done. Returns `work`'s result and
/// whether the consumer reported lost data meanwhile.
async fn write_with_backpressure<R>(
    consumer: &Arc<TaskConsumer>,
    metrics: &crate::metrics::Metrics,
    labels: &[String; 2],
    work: impl std::future::Future<Output = R>,
) -> (R, bool) {
    let labels = [labels[0].as_str(), labels[1].as_str()];
    let paused_gauge = metrics.paused_partitions.with_label_values(&labels);
    tokio::pin!(work);
    let pause_at = tokio::time::Instant::now() + BACKPRESSURE_AFTER;
    let mut paused: Option<TopicPartitionList> = None;
    let mut data_lost = false;
    let result = loop {
        tokio::select! {
            biased;
            result = &mut work => break result,
            _ = tokio::time::sleep_until(pause_at), if paused.is_none() => {
                let assignment = consumer.assignment().unwrap_or_default();
                if let Err(e) = consumer.pause(&assignment) {
                    tracing::warn!(error = %e, "pausing partitions for backpressure failed");
                }
                paused_gauge.set(assignment.count() as i64);
                metrics.backpressure_pauses.with_label_values(&labels).inc();
                tracing::info!(partitions = assignment.count(), "backpressure: the batch is slow to write; partitions paused, the consumer keeps polling");
                paused = Some(assignment);
            }
            // Polling at least this often keeps the member within
            // max.poll.interval.ms.
            received = tokio::time::timeout(Duration::from_millis(200), consumer.recv()), if paused.is_some() => {
                match received {
                    Err(_idle) => {}
                    Ok(Ok(m)) => {
                        // Fetched before the pause, or from a partition
                        // assigned meanwhile: read again after the batch.
                        let (topic, partition, offset) = (m.topic().to_string(), m.partition(), m.offset());
                        drop(m);
                        let _ = consumer.seek(&topic, partition, Offset::Offset(offset), Duration::ZERO);
                        let mut tpl = TopicPartitionList::new();
                        tpl.add_partition(&topic, partition);
                        let _ = consumer.pause(&tpl);
                        if let Some(all) = paused.as_mut() && all.find_partition(&topic, partition).is_none() {
                            all.add_partition(&topic, partition);
                            paused_gauge.set(all.count() as i64);
                        }
                    }
                    Ok(Err(e)) if is_offset_out_of_range(&e) => data_lost = true,
                    Ok(Err(e)) => tracing::warn!(error = %e, "consumer error"),
                }
            }
        }
    };
    if let Some(all) = paused {
        // Only what the task still owns; exactly-once partitions assigned
        // meanwhile are sought to the sink's offsets before they resume.
        let owned = consumer.assignment().unwrap_or_default();
        let mut resume = TopicPartitionList::new();
        for e in all.elements() {
            if owned.find_partition(e.topic(), e.partition()).is_some() {
                resume.add_partition(e.topic(), e.partition());
            }
        }
        let resume = consumer.context().resumable(&resume);
        if let Err(e) = consumer.resume(&resume) {
            tracing::warn!(error = %e, "resuming partitions after backpressure failed");
        }
        paused_gauge.set(0);
        tracing::info!(
            partitions = resume.count(),
            "backpressure: the batch is written; partitions resumed"
        );
    }
    (result, data_lost)
}

/// Reads the next batch, converts and transforms it. `None`: no record
/// came (the task is stopping, nothing arrived in time, or `stop_waiting`
/// completed first).
async fn prepare(
    env: &mut TaskEnv,
    consumer: &Arc<TaskConsumer>,
    errors: &ErrorHandler,
    stop_waiting: impl std::future::Future<Output = ()>,
) -> Result<Option<Prepared>, ConnectError> {
    // The spans here and around the write time a batch's steps (a profile
    // of where a task waits: see the JDBC bench).
    let batch = read_batch(env, consumer, stop_waiting)
        .instrument(tracing::debug_span!("sink_read"))
        .await?;
    if batch.is_empty() {
        return Ok(None);
    }
    // Timed from here until dropped, when the batch is ready.
    let converting = tracing::debug_span!("sink_convert");
    let started = Instant::now();
    let range = match batch_ranges(env, &batch) {
        Ok(range) => range,
        Err(read_backwards) => {
            read_again(consumer, &read_backwards).await?;
            return Ok(None);
        }
    };
    let converted = check_converters(env, errors, batch)
        .instrument(converting.clone())
        .await?;
    let inputs = &converted.inputs;
    let outputs = transform_all(env, errors, inputs, converted.chain_inputs())
        .instrument(converting.clone())
        .await?;
    let outputs = schema_outputs(
        env,
        errors,
        inputs,
        converted.chain_inputs(),
        outputs,
        false,
    )
    .instrument(converting)
    .await?;
    // End-to-end latency of what is about to be written, observed once
    // it is.
    let stamps: Vec<(String, i64)> = outputs
        .iter()
        .filter_map(|(origin, r)| {
            let stamp = r.last_header(LATENCY_HEADER)?.value.as_deref()?;
            let ms = i64::from_be_bytes(stamp.try_into().ok()?);
            Some((inputs[*origin].topic.clone(), ms))
        })
        .collect();
    Ok(Some(Prepared {
        converted,
        outputs,
        range,
        stamps,
        started,
    }))
}

/// Writes a prepared batch: exactly once with its offsets in one sink
/// transaction, otherwise `put` and `flush`.
async fn write(
    task: &mut dyn SinkTask,
    errors: &ErrorHandler,
    class: &str,
    guarantee: DeliveryGuarantee,
    cancel: &tokio_util::sync::CancellationToken,
    batch: &Prepared,
) -> Result<WriteEnd, ConnectError> {
    let inputs = &batch.converted.inputs;
    let outputs = &batch.outputs;
    match guarantee {
        DeliveryGuarantee::ExactlyOnce => {
            let offsets = batch.offsets();
            match put_exactly_once(task, errors, class, inputs, outputs, &offsets).await {
                Ok(written) => Ok(WriteEnd::Written(written)),
                // Stopping: nothing of the batch is committed; it is read again.
                Err(_) if cancel.is_cancelled() => Ok(WriteEnd::Stop),
                Err(error) if error.is_fenced() => Ok(WriteEnd::Fenced { offsets, error }),
                Err(e) => Err(e),
            }
        }
        DeliveryGuarantee::AtMostOnce | DeliveryGuarantee::AtLeastOnce => {
            let mut dead = BTreeSet::new();
            if !outputs.is_empty()
                && let Err(e) =
                    put_isolating(task, errors, class, inputs, outputs, &mut dead, false).await
            {
                if cancel.is_cancelled() {
                    // Stopping: the batch is not committed and is read again.
                    return Ok(WriteEnd::Stop);
                }
                return Err(e);
            }
            let flushed: Result<_, ConnectError> = retry_infrastructure!(
                errors,
                Stage::TaskPut,
                "flushing the sink",
                task.flush().await
            );
            if flushed?.is_none() {
                return Ok(WriteEnd::Stop);
            }
            Ok(WriteEnd::Written(outputs.len() - dead.len()))
        }
    }
}

/// After a batch is written: its metrics, and the group's offsets (at least
/// once, the commit that makes it done; exactly once, for lag monitoring
/// and tools, the sink having the offsets already).
async fn finish(
    env: &TaskEnv,
    consumer: &Arc<TaskConsumer>,
    guarantee: DeliveryGuarantee,
    batch: &Prepared,
    written: usize,
) {
    env.count("put", "ok", written);
    let now_ms = chrono::Utc::now().timestamp_millis();
    for (topic, ms) in &batch.stamps {
        env.metrics
            .e2e_latency
            .with_label_values(&[topic.as_str(), env.connector.as_ref()])
            .observe((now_ms - ms).max(0) as f64 / 1000.0);
    }
    if guarantee != DeliveryGuarantee::AtMostOnce {
        commit(env, consumer, &batch.next()).await;
    }
    env.observe_batch_time(batch.started);
}

/// Writes the outputs but those in `dead`. Infrastructure failures are
/// retried (or, `in_transaction`, returned for the whole transaction to be
/// redone); a data error splits the batch in halves until the bad records
/// stand alone, so the good rows are written and each bad one is handled
/// with its own error; the positions of those handled are added to `dead`.
async fn put_isolating(
    task: &mut dyn SinkTask,
    errors: &ErrorHandler,
    class: &str,
    inputs: &[Record],
    outputs: &[(usize, Record)],
    dead: &mut BTreeSet<usize>,
    in_transaction: bool,
) -> Result<(), ConnectError> {
    let live: Vec<usize> = (0..outputs.len()).filter(|i| !dead.contains(i)).collect();
    if live.is_empty() {
        return Ok(());
    }
    let mut pending = vec![live];
    while let Some(chunk) = pending.pop() {
        // `put` takes the records: each attempt gets its own copy.
        let records = || chunk.iter().map(|&i| outputs[i].1.clone()).collect();
        let mut retrier = errors.retrier(Stage::TaskPut, true);
        let outcome = loop {
            match task.put(records()).await {
                Ok(()) => break Ok(()),
                Err(e) if e.kind == ErrorKind::Retriable && in_transaction => return Err(e),
                Err(e) if e.kind == ErrorKind::Retriable && retrier.again(&e).await => continue,
                Err(e) => break Err(e),
            }
        };
        match outcome {
            Ok(()) => {}
            Err(e) if e.kind == ErrorKind::Data && chunk.len() > 1 => {
                let mut first = chunk;
                let second = first.split_off(first.len() / 2);
                pending.push(second);
                pending.push(first);
            }
            Err(e) if e.kind == ErrorKind::Data => {
                dead.insert(chunk[0]);
                errors
                    .tolerate_or_fail(Failure {
                        record: Some(&inputs[outputs[chunk[0]].0]),
                        stage: Stage::TaskPut,
                        component: class,
                        error: &e,
                        attempts: retrier.attempts().max(1),
                    })
                    .await?;
            }
            Err(e) if e.kind == ErrorKind::Retriable && errors.is_cancelled() => {
                return Err(ConnectError::retriable(
                    "stopped while the sink was unavailable; the batch is not committed",
                ));
            }
            Err(e) if e.kind == ErrorKind::Retriable => {
                return Err(infrastructure_exhausted(
                    "writing to the sink",
                    e,
                    retrier.attempts(),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Exactly-once: the batch's rows and `offsets` in one sink transaction.
/// A data error splits the batch inside the transaction (each `put` is
/// atomic), so the bad record is dead-lettered and the rest written with
/// the offsets. An infrastructure failure rolls back and redoes the whole
/// transaction, after asking the sink whether the failed attempt did in
/// fact commit (a lost reply to COMMIT). Returns how many records were
/// written.
async fn put_exactly_once(
    task: &mut dyn SinkTask,
    errors: &ErrorHandler,
    class: &str,
    inputs: &[Record],
    outputs: &[(usize, Record)],
    offsets: &[CommitOffset],
) -> Result<usize, ConnectError> {
    let mut dead = BTreeSet::new();
    let mut retrier = errors.retrier(Stage::TaskPut, true);
    let mut first = true;
    loop {
        let attempt: Result<bool, ConnectError> = async {
            if !first && already_committed(task, offsets).await? {
                return Ok(false);
            }
            task.begin().await?;
            put_isolating(task, errors, class, inputs, outputs, &mut dead, true).await?;
            task.commit(offsets).await?;
            Ok(true)
        }
        .await;
        first = false;
        match attempt {
            Ok(committed_now) => {
                if !committed_now {
                    tracing::info!(
                        "the sink had committed the batch before the error; not writing it again"
                    );
                }
                return Ok(outputs.len() - dead.len());
            }
            Err(e) => {
                task.rollback().await;
                if e.is_fenced() {
                    // Redoing it would be fenced again: the caller reads
                    // on from the stored offsets instead.
                    return Err(e);
                }
                let what = "writing the batch and its offsets in one transaction";
                match retrier.after(e, what).await {
                    Retry::Again => {}
                    Retry::Stopped => {
                        return Err(ConnectError::retriable(
                            "stopped while the sink was unavailable; the batch is not committed",
                        ));
                    }
                    Retry::Failed(e) => return Err(e),
                }
            }
        }
    }
}

/// Whether the sink's stored offsets already cover `offsets`.
async fn already_committed(
    task: &mut dyn SinkTask,
    offsets: &[CommitOffset],
) -> Result<bool, ConnectError> {
    let partitions: Vec<(String, i32)> = offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition))
        .collect();
    let stored = task.stored_offsets(&partitions).await?;
    Ok(offsets.iter().all(|o| {
        stored
            .iter()
            .any(|s| s.topic == o.topic && s.partition == o.partition && s.offset >= o.next)
    }))
}

/// After a fenced commit: moves the batch's partitions (those still
/// assigned) to the offsets stored in the sink, or back to the batch's
/// first offset where none is stored, so nothing the other task did not
/// write is skipped and nothing it wrote is written again.
async fn rewind(
    task: &mut dyn SinkTask,
    consumer: &Arc<TaskConsumer>,
    errors: &ErrorHandler,
    offsets: &[CommitOffset],
) -> Result<(), ConnectError> {
    let partitions: Vec<(String, i32)> = offsets
        .iter()
        .map(|o| (o.topic.clone(), o.partition))
        .collect();
    let stored: Result<_, ConnectError> = retry_infrastructure!(
        errors,
        Stage::TaskPut,
        "reading the offsets stored in the sink",
        task.stored_offsets(&partitions).await
    );
    let stored = stored?.ok_or_else(|| ConnectError::retriable("stopped while rewinding"))?;
    let positions: Vec<(String, i32, i64)> = offsets
        .iter()
        .map(|o| {
            let at = stored
                .iter()
                .find(|s| s.topic == o.topic && s.partition == o.partition)
                .map_or(o.first, |s| s.offset);
            (o.topic.clone(), o.partition, at)
        })
        .collect();
    tracing::info!(positions = ?positions.iter().map(|(t, p, o)| format!("{t}-{p}@{o}")).collect::<Vec<_>>(), "rewound to the offsets stored in the sink");
    seek_owned(
        consumer,
        positions,
        "moving the consumer to the offsets stored in the sink",
    )
    .await
}

/// Exactly-once: moves newly assigned (and paused) partitions to the
/// offsets stored in the sink, then resumes them. Partitions the sink has
/// no offsets for start from the group's committed offset.
async fn restore_positions(
    env: &TaskEnv,
    task: &mut dyn SinkTask,
    consumer: &Arc<TaskConsumer>,
    errors: &ErrorHandler,
    partitions: Vec<(String, i32)>,
) -> Result<(), ConnectError> {
    let stored: Result<_, ConnectError> = retry_infrastructure!(
        errors,
        Stage::TaskPut,
        "reading the offsets stored in the sink",
        task.stored_offsets(&partitions).await
    );
    let stored =
        stored?.ok_or_else(|| ConnectError::retriable("stopped while restoring positions"))?;
    let mut seek = TopicPartitionList::new();
    for o in &stored {
        let _ = seek.add_partition_offset(&o.topic, o.partition, Offset::Offset(o.offset));
    }
    let mut resume = TopicPartitionList::new();
    for (topic, partition) in &partitions {
        resume.add_partition(topic, *partition);
    }
    let c = consumer.clone();
    let sought = tokio::task::spawn_blocking(move || {
        if seek.count() > 0 {
            let done = c.seek_partitions(seek, Duration::from_secs(30))?;
            if let Some(e) = done.elements().iter().find_map(|e| e.error().err()) {
                return Err(e);
            }
        }
        // A partition revoked meanwhile is no longer ours to resume.
        let owned = c.assignment()?;
        let mut ours = TopicPartitionList::new();
        for e in resume.elements() {
            if owned.find_partition(e.topic(), e.partition()).is_some() {
                ours.add_partition(e.topic(), e.partition());
            }
        }
        c.resume(&ours)
    })
    .await
    .map_err(|e| ConnectError::fatal(format!("seeking thread failed: {e}")))?;
    sought.map_err(|e| {
        ConnectError::fatal("moving the consumer to the offsets stored in the sink").with_source(e)
    })?;
    tracing::info!(
        connector = %env.connector,
        task = env.task_id,
        partitions = partitions.len(),
        restored = ?stored.iter().map(|o| format!("{}-{}@{}", o.topic, o.partition, o.offset)).collect::<Vec<_>>(),
        "positions restored from the offsets stored in the sink"
    );
    Ok(())
}
