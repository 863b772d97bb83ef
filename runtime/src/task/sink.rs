//! The sink loop: consume a batch, transform, `put`, `flush`, then commit the
//! consumed offsets to Kafka, never before the sink has the records.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::{Message, Offset, TopicPartitionList};
use sluice_sdk::{ConnectError, Header, Record, SinkTask};

use super::{TaskEnv, transform_failure};
use crate::kafka::{ConsumerEvent, SafeConsumerContext, is_offset_out_of_range};

type SafeConsumer = StreamConsumer<SafeConsumerContext>;

/// Kafka Connect's sink consumer group: `connect-<connector>`.
pub fn group_id(connector: &str) -> String {
    format!("connect-{connector}")
}

pub async fn run(mut env: TaskEnv, mut task: Box<dyn SinkTask>) -> Result<(), ConnectError> {
    task.start().await?;
    let (events_tx, mut events_rx) = tokio::sync::mpsc::unbounded_channel();
    let context = SafeConsumerContext {
        events: events_tx,
        connector: env.connector.clone(),
    };
    let client_id = format!("sluice-{}-{}", env.connector, env.task_id);
    let consumer = Arc::new(
        env.clients
            .consumer(&group_id(&env.connector), &client_id, context)
            .map_err(|e| ConnectError::fatal("creating the Kafka consumer").with_source(e))?,
    );
    let topics: Vec<&str> = env.common.topics.iter().map(String::as_str).collect();
    consumer
        .subscribe(&topics)
        .map_err(|e| ConnectError::fatal(format!("subscribing to {topics:?}")).with_source(e))?;
    let result = run_loop(&mut env, task.as_mut(), &consumer, &mut events_rx).await;
    task.stop().await;
    result
}

async fn run_loop(
    env: &mut TaskEnv,
    task: &mut dyn SinkTask,
    consumer: &Arc<SafeConsumer>,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<ConsumerEvent>,
) -> Result<(), ConnectError> {
    let max_records = env.common.batch_max_records;
    let max_wait = Duration::from_millis(env.common.batch_max_ms);
    loop {
        while let Ok(event) = events.try_recv() {
            tracing::debug!(?event, "rebalance");
        }
        let batch = match next_batch(env, consumer, max_records, max_wait).await {
            Ok(batch) => batch,
            Err(e) => return Err(e),
        };
        if batch.is_empty() {
            if env.cancel.is_cancelled() {
                return Ok(());
            }
            continue;
        }
        env.swap_chain_if_updated().await;
        let started = Instant::now();
        env.count("consume", "ok", batch.len());
        // Next offset to read per partition, committed once all is written.
        let mut next: BTreeMap<(String, i32), i64> = BTreeMap::new();
        for r in &batch {
            next.insert((r.topic.clone(), r.partition), r.offset + 1);
        }
        let coordinates: Vec<String> = batch.iter().map(Record::coordinates).collect();
        let results = env.transform(batch).await?;
        let mut outputs = Vec::with_capacity(results.len());
        for (at, result) in coordinates.iter().zip(results) {
            match result {
                Ok(records) => outputs.extend(records),
                Err(failure) => {
                    env.count("transform", "failed", 1);
                    return Err(transform_failure(at, failure));
                }
            }
        }
        env.count("transform", "ok", outputs.len());
        let written = outputs.len();
        if !outputs.is_empty() {
            task.put(outputs).await?;
        }
        task.flush().await?;
        env.count("put", "ok", written);
        commit(env, consumer, &next).await;
        let [c, t] = env.labels();
        env.metrics
            .batch_seconds
            .with_label_values(&[c.as_str(), t.as_str()])
            .observe(started.elapsed().as_secs_f64());
        if env.cancel.is_cancelled() {
            return Ok(());
        }
    }
}

/// Up to `max_records`, waiting at most `max_wait` once the first arrives.
/// Returns early (possibly empty) when the task is cancelled.
async fn next_batch(
    env: &TaskEnv,
    consumer: &Arc<SafeConsumer>,
    max_records: usize,
    max_wait: Duration,
) -> Result<Vec<Record>, ConnectError> {
    let mut batch = Vec::new();
    let mut deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while batch.len() < max_records {
        let received = tokio::select! {
            biased;
            _ = env.cancel.cancelled() => break,
            r = tokio::time::timeout_at(deadline, consumer.recv()) => r,
        };
        match received {
            Err(_elapsed) => break,
            Ok(Ok(message)) => {
                if batch.is_empty() {
                    deadline = tokio::time::Instant::now() + max_wait;
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

/// Names the partitions whose position the broker no longer has, counts
/// them, and fails the task: skipping ahead would lose records silently.
async fn data_loss(env: &TaskEnv, consumer: &Arc<SafeConsumer>) -> ConnectError {
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

async fn commit(env: &TaskEnv, consumer: &Arc<SafeConsumer>, next: &BTreeMap<(String, i32), i64>) {
    let mut tpl = TopicPartitionList::with_capacity(next.len());
    for ((topic, partition), offset) in next {
        let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(*offset));
    }
    let consumer = consumer.clone();
    let result = tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
        .await
        .unwrap_or(Err(rdkafka::error::KafkaError::Canceled));
    if let Err(e) = result {
        // The records are written; without the commit they are read again
        // after a restart or rebalance, which the idempotent sink absorbs.
        let [c, t] = env.labels();
        env.metrics
            .commit_failures
            .with_label_values(&[c.as_str(), t.as_str()])
            .inc();
        tracing::warn!(error = %e, "committing offsets failed; the records will be delivered again");
    }
}

fn to_record(m: &BorrowedMessage<'_>) -> Record {
    let headers = m
        .headers()
        .map(|hs| {
            hs.iter()
                .map(|h| Header {
                    key: h.key.to_string(),
                    value: h.value.map(<[u8]>::to_vec),
                })
                .collect()
        })
        .unwrap_or_default();
    Record {
        topic: m.topic().to_string(),
        partition: m.partition(),
        offset: m.offset(),
        timestamp: m.timestamp().to_millis(),
        key: m.key().map(<[u8]>::to_vec),
        value: m.payload().map(<[u8]>::to_vec),
        headers,
    }
}
