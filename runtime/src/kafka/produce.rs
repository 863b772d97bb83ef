//! Producing records: enqueued in order (waiting while librdkafka's queue
//! is full), each delivery awaited, and a failure classified by what the
//! broker said.

use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{DeliveryFuture, FutureProducer, FutureRecord, Producer};
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
    send_now(producer);
    let mut results = Vec::with_capacity(records.len());
    for (r, delivery) in records.iter().zip(deliveries) {
        results.push(await_delivery(&r.topic, delivery).await);
    }
    results
}

/// The longest a [`send_now`] keeps librdkafka from lingering.
const SEND_NOW_BOUND_MS: i32 = 1_000;

/// Sends what `producer` has queued now rather than after `linger.ms`.
/// For a caller that has enqueued a whole batch and is about to wait for
/// every delivery, lingering only adds its length to each batch: 5 ms on
/// every exactly-once transaction, which held a stream near 120k records/s
/// on one task (BENCHMARKS.md, pipeline 2).
///
/// librdkafka stops lingering while a flush is in progress, so one runs on
/// a blocking thread until the queue is delivered (at most
/// `SEND_NOW_BOUND_MS`). Nothing waits for it: the caller's deliveries
/// say how each record fared, as before.
pub fn send_now(producer: &FutureProducer) {
    let producer = producer.clone();
    tokio::task::spawn_blocking(move || {
        // SAFETY: the handle belongs to `producer`, which this closure owns
        // (and so keeps alive) until the call returns.
        unsafe {
            rdkafka::bindings::rd_kafka_flush(producer.client().native_ptr(), SEND_NOW_BOUND_MS)
        };
    });
}

/// Produces one record and waits for its delivery, sent without lingering
/// (see [`send_now`]): for a caller that must know it was written before
/// going on, such as a dead letter. Waits up to `queue_timeout` for room
/// in a full queue.
pub async fn send_awaited(
    producer: &FutureProducer,
    mut record: FutureRecord<'_, [u8], [u8]>,
    queue_timeout: Duration,
) -> Result<(), KafkaError> {
    let deadline = tokio::time::Instant::now() + queue_timeout;
    let delivery = loop {
        match producer.send_result(record) {
            Ok(delivery) => break delivery,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back))
                if tokio::time::Instant::now() < deadline =>
            {
                record = back;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err((e, _)) => return Err(e),
        }
    };
    send_now(producer);
    match delivery.await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err((e, _))) => Err(e),
        Err(_canceled) => Err(KafkaError::Canceled),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::EmbeddedBroker;
    use rdkafka::ClientConfig;

    /// Ten minutes: a batch that waited out its linger would time out below.
    const LINGER_MS: &str = "600000";
    const WITHIN: Duration = Duration::from_secs(30);

    fn records(topic: &str) -> Vec<Record> {
        (0..10)
            .map(|i| Record {
                topic: topic.into(),
                partition: -1,
                offset: -1,
                value: Some(format!("record {i}").into_bytes()),
                ..Default::default()
            })
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_awaited_whole_is_sent_without_waiting_out_the_linger() {
        let broker = EmbeddedBroker::start().unwrap();
        broker.create_topic("lingering", 1).await.unwrap();
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap_servers())
            .set("linger.ms", LINGER_MS)
            .set("message.timeout.ms", "900000")
            .create()
            .unwrap();
        let results = tokio::time::timeout(WITHIN, produce_each(&producer, &records("lingering")))
            .await
            .expect("the batch was delivered without waiting out linger.ms");
        assert!(results.iter().all(Result::is_ok), "{results:?}");

        // And inside a transaction, as an exactly-once task writes.
        let txn: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap_servers())
            .set("linger.ms", LINGER_MS)
            .set("message.timeout.ms", "900000")
            .set("transaction.timeout.ms", "900000")
            .set("transactional.id", "lingering-txn")
            .create()
            .unwrap();
        txn.init_transactions(WITHIN).unwrap();
        txn.begin_transaction().unwrap();
        let batch = records("lingering");
        let mut deliveries = Vec::new();
        for r in &batch {
            deliveries.push(enqueue(&txn, r).await);
        }
        send_now(&txn);
        for (r, delivery) in batch.iter().zip(deliveries) {
            tokio::time::timeout(WITHIN, await_delivery(&r.topic, delivery))
                .await
                .expect("the transaction's records were delivered without waiting out linger.ms")
                .unwrap();
        }
        txn.commit_transaction(WITHIN).unwrap();

        // One record on its own, as a dead letter is written.
        let one = future_record(
            "lingering",
            None,
            Some(b"dead letter"),
            None,
            OwnedHeaders::new(),
        );
        tokio::time::timeout(WITHIN, send_awaited(&producer, one, WITHIN))
            .await
            .expect("a single record was delivered without waiting out linger.ms")
            .unwrap();
    }
}
