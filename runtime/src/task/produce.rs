//! Producing a transformed batch (sources and streams), each record's
//! failure handled by the task's error policy.

use rdkafka::producer::FutureProducer;
use sluice_sdk::{ConnectError, ErrorKind, Record};

use super::TaskEnv;
use crate::errors::{ErrorHandler, Failure, Retry, Stage};
use crate::kafka::produce_each;
use crate::kafka::transaction::{TransactionalProducer, transactional_id};

/// Produces the outputs: records Kafka refuses for what they are go to the
/// error handler, other failures are retried as infrastructure. Returns how
/// many were produced, or None if the task was stopped meanwhile.
pub(crate) async fn produce_batch(
    producer: &FutureProducer,
    errors: &ErrorHandler,
    inputs: &[Record],
    outputs: Vec<(usize, Record)>,
) -> Result<Option<usize>, ConnectError> {
    let mut pending = outputs;
    let mut retrier = errors.retrier(Stage::KafkaProduce, true);
    let mut produced = 0;
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
                        .tolerate_or_fail(Failure {
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
        if let Some(e) = last_error {
            match retrier.after(e, "producing to Kafka").await {
                Retry::Again => {}
                Retry::Stopped => return Ok(None),
                Retry::Failed(e) => return Err(e),
            }
        }
    }
    Ok(Some(produced))
}

impl TaskEnv {
    /// The task's producer (idempotent, `acks=all`).
    pub(crate) fn producer(&self) -> Result<FutureProducer, ConnectError> {
        self.clients
            .producer(&self.client_id(), &self.common.producer_overrides)
            .map_err(|e| ConnectError::fatal("creating the Kafka producer").with_source(e))
    }

    /// The task's transactional producer, its `transactional.id` stable
    /// across restarts so a zombie predecessor is fenced.
    pub(crate) async fn transactional_producer(
        &self,
    ) -> Result<TransactionalProducer, ConnectError> {
        let id = transactional_id(self.clients.group_id(), &self.connector, self.task_id);
        TransactionalProducer::start(
            &self.clients,
            &self.client_id(),
            &id,
            &self.common.producer_overrides,
            &self.metrics,
            &self.connector,
            self.task_id,
        )
        .await
    }
}
