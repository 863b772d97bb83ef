//! Producing records: enqueued in order (waiting while librdkafka's queue
//! is full), each delivery awaited, and a failure classified by what the
//! broker said.

use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord};
use sluice_sdk::{ConnectError, ErrorKind, Record};

/// Enqueues every record in order, waits for every delivery report, and
/// returns one result per record.
pub async fn produce_each(
    producer: &FutureProducer,
    records: &[Record],
) -> Vec<Result<(), ConnectError>> {
    let mut deliveries = Vec::with_capacity(records.len());
    for r in records {
        deliveries.push(enqueue(producer, r).await);
    }
    let mut results = Vec::with_capacity(records.len());
    for (r, delivery) in records.iter().zip(deliveries) {
        results.push(await_delivery(&r.topic, delivery).await);
    }
    results
}

pub async fn await_delivery(
    topic: &str,
    delivery: Result<DeliveryFuture, ConnectError>,
) -> Result<(), ConnectError> {
    match delivery {
        Err(e) => Err(e),
        Ok(future) => match future.await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err((e, _))) => Err(produce_error(topic, e)),
            Err(_canceled) => Err(ConnectError::retriable(
                "the producer was dropped before delivering",
            )),
        },
    }
}

pub async fn enqueue(
    producer: &FutureProducer,
    r: &Record,
) -> Result<DeliveryFuture, ConnectError> {
    let mut headers = OwnedHeaders::new_with_capacity(r.headers.len());
    for h in &r.headers {
        headers = headers.insert(KafkaHeader {
            key: &h.key,
            value: h.value.as_deref(),
        });
    }
    let mut fr = future_record(
        &r.topic,
        r.key.as_deref(),
        r.value.as_deref(),
        r.timestamp,
        headers,
    );
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

pub fn produce_error(topic: &str, e: KafkaError) -> ConnectError {
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

/// A record to produce: what is absent stays unset (the partitioner picks
/// the partition, the producer stamps the time).
pub fn future_record<'a>(
    topic: &'a str,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    timestamp: Option<i64>,
    headers: OwnedHeaders,
) -> FutureRecord<'a, [u8], [u8]> {
    let mut record: FutureRecord<'a, [u8], [u8]> = FutureRecord::to(topic).headers(headers);
    if let Some(k) = key {
        record = record.key(k);
    }
    if let Some(v) = value {
        record = record.payload(v);
    }
    if let Some(ts) = timestamp {
        record = record.timestamp(ts);
    }
    record
}
