//! The source loop: poll, transform, produce, wait for every delivery
//! report, then commit the batch's source offsets.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sluice_sdk::connector::source_partition_key;
use sluice_sdk::{ConnectError, Record, SourceTask};

use super::{TaskEnv, transform_failure};
use crate::offsets::OffsetStore;

pub async fn run(
    mut env: TaskEnv,
    mut task: Box<dyn SourceTask>,
    offsets: Arc<OffsetStore>,
) -> Result<(), ConnectError> {
    let client_id = format!("sluice-{}-{}", env.connector, env.task_id);
    let producer = env
        .clients
        .producer(&client_id)
        .map_err(|e| ConnectError::fatal("creating the Kafka producer").with_source(e))?;
    let result = run_loop(&mut env, task.as_mut(), &producer, &offsets).await;
    task.stop().await;
    result
}

async fn run_loop(
    env: &mut TaskEnv,
    task: &mut dyn SourceTask,
    producer: &FutureProducer,
    offsets: &OffsetStore,
) -> Result<(), ConnectError> {
    loop {
        let polled = tokio::select! {
            biased;
            _ = env.cancel.cancelled() => return Ok(()),
            polled = task.poll() => polled,
        };
        let batch = match polled? {
            Some(batch) if batch.is_empty() => continue,
            Some(batch) => batch,
            None => {
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

        // The offset to commit per source partition: the last in the batch.
        let mut updates: HashMap<String, serde_json::Value> = HashMap::new();
        for r in &batch {
            updates.insert(
                source_partition_key(&r.source_partition),
                r.source_offset.clone(),
            );
        }
        let inputs: Vec<Record> = batch.iter().map(|r| r.to_record()).collect();
        let results = env.transform(inputs).await?;
        let mut outputs = Vec::with_capacity(results.len());
        for (source, result) in batch.iter().zip(results) {
            match result {
                Ok(records) => outputs.extend(records),
                Err(failure) => {
                    env.count("transform", "failed", 1);
                    let at = format!(
                        "from source partition {} at {}",
                        source.source_partition, source.source_offset
                    );
                    return Err(transform_failure(&at, failure));
                }
            }
        }
        env.count("transform", "ok", outputs.len());
        let produced = outputs.len();
        produce_all(producer, outputs).await?;
        env.count("produce", "ok", produced);

        // Every record of the batch is in Kafka: its offsets may move.
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

/// Enqueues every record in order, then waits for every delivery report.
pub(crate) async fn produce_all(
    producer: &FutureProducer,
    records: Vec<Record>,
) -> Result<(), ConnectError> {
    let mut deliveries = Vec::with_capacity(records.len());
    for r in &records {
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
                Ok(delivery) => {
                    deliveries.push(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    fr = back;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                Err((e, _)) => {
                    return Err(produce_error(&r.topic, e));
                }
            }
        }
    }
    for delivery in deliveries {
        match delivery.await {
            Ok(Ok(_)) => {}
            Ok(Err((e, message))) => {
                use rdkafka::Message;
                return Err(produce_error(message.topic(), e));
            }
            Err(_canceled) => {
                return Err(ConnectError::fatal(
                    "the producer was dropped before delivering",
                ));
            }
        }
    }
    Ok(())
}

fn produce_error(topic: &str, e: KafkaError) -> ConnectError {
    let kind = match e.rdkafka_error_code() {
        Some(RDKafkaErrorCode::MessageSizeTooLarge | RDKafkaErrorCode::InvalidRecord) => {
            sluice_sdk::ErrorKind::Data
        }
        Some(RDKafkaErrorCode::ProducerFenced | RDKafkaErrorCode::TopicAuthorizationFailed) => {
            sluice_sdk::ErrorKind::Fatal
        }
        _ => sluice_sdk::ErrorKind::Retriable,
    };
    ConnectError::new(kind, format!("producing to topic `{topic}`")).with_source(e)
}
