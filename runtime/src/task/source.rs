//! The source loop: poll, transform, produce, wait for every delivery
//! report, then commit the batch's source offsets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sluice_sdk::connector::source_partition_key;
use sluice_sdk::{ConnectError, ErrorKind, Record, SourceTask};

use super::TaskEnv;
use super::sink::{infrastructure_exhausted, transform_all};
use crate::errors::{ErrorHandler, Failure, Stage};
use crate::metrics::LATENCY_HEADER;
use crate::offsets::OffsetStore;

pub async fn run(
    mut env: TaskEnv,
    mut task: Box<dyn SourceTask>,
    offsets: Arc<OffsetStore>,
    errors: ErrorHandler,
) -> Result<(), ConnectError> {
    let client_id = format!("sluice-{}-{}", env.connector, env.task_id);
    let producer = env
        .clients
        .producer(&client_id, &env.common.producer_overrides)
        .map_err(|e| ConnectError::fatal("creating the Kafka producer").with_source(e))?;
    let result = run_loop(&mut env, task.as_mut(), &producer, &offsets, &errors).await;
    task.stop().await;
    result
}

async fn run_loop(
    env: &mut TaskEnv,
    task: &mut dyn SourceTask,
    producer: &FutureProducer,
    offsets: &OffsetStore,
    errors: &ErrorHandler,
) -> Result<(), ConnectError> {
    let class = env.common.connector_class.clone();
    loop {
        if env.is_paused() && !env.wait_while_paused().await {
            return Ok(());
        }
        let mut retrier = errors.retrier(Stage::TaskPoll, true);
        let polled = loop {
            let polled = tokio::select! {
                biased;
                _ = env.cancel.cancelled() => return Ok(()),
                polled = task.poll() => polled,
            };
            match polled {
                Ok(p) => break Some(p),
                Err(e) if e.kind == ErrorKind::Retriable && retrier.again(&e).await => continue,
                Err(_) if env.cancel.is_cancelled() => return Ok(()),
                Err(e) if e.kind == ErrorKind::Retriable => {
                    return Err(infrastructure_exhausted(
                        "polling the source",
                        e,
                        retrier.attempts(),
                    ));
                }
                Err(e) => {
                    // A poll that failed on bad data: no record to keep, but
                    // the failure is recorded like any other.
                    errors
                        .give_up(Failure {
                            record: None,
                            stage: Stage::TaskPoll,
                            component: &class,
                            error: &e,
                            attempts: 1,
                        })
                        .await?;
                    break None;
                }
            }
        };
        let batch = match polled {
            None => continue,
            Some(Some(batch)) if batch.is_empty() => continue,
            Some(Some(batch)) => batch,
            Some(None) => {
                // The source is exhausted: stay RUNNING, idle, as Kafka
                // Connect tasks do.
                tracing::info!("source has no more records");
                env.cancel.cancelled().await;
                return Ok(());
            }
        };
        env.swap_chain_if_updated().await;
        let started = Instant::now();
        env.count("poll", "ok", batch.len());
        env.observe_batch(batch.len());

        // The offset to commit per source partition: the last in the batch.
        let mut updates: HashMap<String, serde_json::Value> = HashMap::new();
        for r in &batch {
            updates.insert(
                source_partition_key(&r.source_partition),
                r.source_offset.clone(),
            );
        }
        let inputs: Vec<Record> = batch.iter().map(|r| r.to_record()).collect();
        let mut outputs = transform_all(env, errors, &inputs).await?;
        // Stamp the time the record entered the pipeline, unless a transform
        // or the source already did, for end-to-end latency at the sinks.
        let now = chrono::Utc::now().timestamp_millis().to_be_bytes().to_vec();
        for (_, r) in &mut outputs {
            if !r.has_header(LATENCY_HEADER) {
                r.add_header(LATENCY_HEADER, Some(now.clone()));
            }
        }

        // Produce; records Kafka refuses for what they are go to the error
        // handler, other failures are retried as infrastructure.
        let mut pending = outputs;
        let mut retrier = errors.retrier(Stage::KafkaProduce, true);
        let mut produced = 0;
        env.note_topics(pending.iter().map(|(_, r)| r.topic.as_str()));
        while !pending.is_empty() {
            let records: Vec<Record> = pending.iter().map(|(_, r)| r.clone()).collect();
            let results = produce_each(producer, &records).await;
            let mut failed_retriably = Vec::new();
            let mut last_error = None;
            for ((origin, record), result) in pending.into_iter().zip(results) {
                match result {
                    Ok(()) => produced += 1,
                    Err(e) if e.kind == ErrorKind::Data => {
                        errors
                            .give_up(Failure {
                                record: Some(&inputs[origin]),
                                stage: Stage::KafkaProduce,
                                component: "kafka-producer",
                                error: &e,
                                attempts: 1,
                            })
                            .await?;
                    }
                    Err(e) if e.kind == ErrorKind::Fatal => return Err(e),
                    Err(e) => {
                        failed_retriably.push((origin, record));
                        last_error = Some(e);
                    }
                }
            }
            pending = failed_retriably;
            if let Some(e) = last_error
                && !retrier.again(&e).await
            {
                if env.cancel.is_cancelled() {
                    return Ok(());
                }
                return Err(infrastructure_exhausted(
                    "producing to Kafka",
                    e,
                    retrier.attempts(),
                ));
            }
        }
        env.count("produce", "ok", produced);

        // Every record of the batch is in Kafka or dead-lettered: its
        // offsets may move.
        offsets
            .commit(&env.connector, updates)
            .map_err(|e| ConnectError::fatal("writing source offsets").with_source(e))?;
        task.commit().await?;
        let [c, t] = env.labels();
        env.metrics
            .batch_seconds
            .with_label_values(&[c.as_str(), t.as_str()])
            .observe(started.elapsed().as_secs_f64());
    }
}

/// Enqueues every record in order, waits for every delivery report, and
/// returns one result per record.
pub(crate) async fn produce_each(
    producer: &FutureProducer,
    records: &[Record],
) -> Vec<Result<(), ConnectError>> {
    let mut deliveries = Vec::with_capacity(records.len());
    for r in records {
        deliveries.push(enqueue(producer, r).await);
    }
    let mut results = Vec::with_capacity(records.len());
    for (r, delivery) in records.iter().zip(deliveries) {
        results.push(match delivery {
            Err(e) => Err(e),
            Ok(future) => match future.await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err((e, _))) => Err(produce_error(&r.topic, e)),
                Err(_canceled) => Err(ConnectError::retriable(
                    "the producer was dropped before delivering",
                )),
            },
        });
    }
    results
}

async fn enqueue(
    producer: &FutureProducer,
    r: &Record,
) -> Result<rdkafka::producer::DeliveryFuture, ConnectError> {
    let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
    for h in &r.headers {
        headers = headers.insert(KafkaHeader {
            key: &h.key,
            value: h.value.as_deref(),
        });
    }
    let mut fr: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&r.topic).headers(headers);
    if let Some(k) = &r.key {
        fr = fr.key(k.as_slice());
    }
    if let Some(v) = &r.value {
        fr = fr.payload(v.as_slice());
    }
    if let Some(ts) = r.timestamp {
        fr = fr.timestamp(ts);
    }
    if r.partition >= 0 {
        fr = fr.partition(r.partition);
    }
    loop {
        match producer.send_result(fr) {
            Ok(delivery) => return Ok(delivery),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                fr = back;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err((e, _)) => return Err(produce_error(&r.topic, e)),
        }
    }
}

fn produce_error(topic: &str, e: KafkaError) -> ConnectError {
    let (kind, class) = match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageSizeTooLarge) => (ErrorKind::Data, "RecordTooLarge"),
        Some(RDKafkaErrorCode::InvalidRecord) => (ErrorKind::Data, "InvalidRecord"),
        Some(RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::TopicAuthorizationFailed) => {
            (ErrorKind::Fatal, "ProducerFatal")
        }
        _ => (ErrorKind::Retriable, "BrokerUnavailable"),
    };
    ConnectError::new(kind, format!("producing to topic `{topic}`"))
        .with_class(class)
        .with_source(e)
}
