//! Kafka transactions for exactly-once source and stream tasks.
//!
//! Each task owns one transactional producer whose `transactional.id` is
//! `<group.id>-<connector>-<task>`, the same across restarts and workers.
//! Starting it (`init_transactions`) fences every earlier producer with that
//! id, so a zombie of the task can no longer commit. Every error of the
//! transactional API is sorted into what the task does next
//! ([`TxnFailure`]): redo the batch, find out what was committed, or fail.

use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, Producer};
use sluice_sdk::{ConfigMap, ConnectError};

use crate::kafka::KafkaClients;
use crate::metrics::Metrics;

/// How long one call of the transactional API may block.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Retries of a retriable error of one call before it counts as failed.
const CALL_ATTEMPTS: u32 = 5;

/// The outcomes `sluice_transactions_total` counts.
pub const OUTCOMES: [&str; 4] = ["committed", "aborted", "ambiguous", "fenced"];

/// Why a transaction did not commit, and so what the task does next.
#[derive(Debug)]
pub enum TxnFailure {
    /// The transaction was aborted: none of it is visible to read_committed
    /// consumers. The task redoes the batch from its last commit.
    Aborted(ConnectError),
    /// The commit's outcome is unknown (it timed out or its reply was
    /// lost). The producer was re-created, which makes the broker finish or
    /// abort the transaction; the task must find out which before going on.
    Ambiguous(ConnectError),
    /// Fenced by a newer producer with the same `transactional.id`, or a
    /// fatal producer error: the task fails with this cause.
    Fatal(ConnectError),
}

impl TxnFailure {
    pub fn into_error(self) -> ConnectError {
        match self {
            TxnFailure::Aborted(e) | TxnFailure::Ambiguous(e) | TxnFailure::Fatal(e) => e,
        }
    }
}

/// The `transactional.id` of a task: stable across restarts and workers.
pub fn transactional_id(group: &str, connector: &str, task: u32) -> String {
    format!("{group}-{connector}-{task}")
}

enum Class {
    Retry,
    Abort,
    Fatal,
}

fn classify(e: &KafkaError) -> Class {
    match e {
        KafkaError::Transaction(t) if t.is_fatal() => Class::Fatal,
        KafkaError::Transaction(t) if t.txn_requires_abort() => Class::Abort,
        KafkaError::Transaction(t) if t.is_retriable() => Class::Retry,
        _ if is_fencing(e.rdkafka_error_code()) => Class::Fatal,
        _ => Class::Abort,
    }
}

pub(crate) fn is_fencing(code: Option<RDKafkaErrorCode>) -> bool {
    matches!(
        code,
        Some(
            RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
                | RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
        )
    )
}

fn is_timeout(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::OperationTimedOut | RDKafkaErrorCode::RequestTimedOut)
    )
}

pub struct TransactionalProducer {
    clients: KafkaClients,
    client_id: String,
    transactional_id: String,
    overrides: ConfigMap,
    producer: FutureProducer,
    metrics: Metrics,
    labels: [String; 2],
}

impl TransactionalProducer {
    /// Creates the producer and registers its `transactional.id` with the
    /// transaction coordinator, fencing earlier producers with that id and
    /// aborting any transaction they left open.
    pub async fn start(
        clients: &KafkaClients,
        client_id: &str,
        transactional_id: &str,
        overrides: &ConfigMap,
        metrics: &Metrics,
        connector: &str,
        task: u32,
    ) -> Result<Self, ConnectError> {
        let producer = init(clients, client_id, transactional_id, overrides).await?;
        tracing::info!(
            transactional_id,
            "transactional producer started; earlier producers with this id are fenced"
        );
        Ok(Self {
            clients: clients.clone(),
            client_id: client_id.to_string(),
            transactional_id: transactional_id.to_string(),
            overrides: overrides.clone(),
            producer,
            metrics: metrics.clone(),
            labels: [connector.to_string(), task.to_string()],
        })
    }

    pub fn producer(&self) -> &FutureProducer {
        &self.producer
    }

    pub fn transactional_id(&self) -> &str {
        &self.transactional_id
    }

    fn count(&self, outcome: &'static str) {
        self.metrics
            .transactions
            .with_label_values(&[self.labels[0].as_str(), self.labels[1].as_str(), outcome])
            .inc();
    }

    pub fn begin(&self) -> Result<(), TxnFailure> {
        self.producer
            .begin_transaction()
            .map_err(|e| TxnFailure::Fatal(self.fatal_error("beginning a transaction", e)))
    }

    /// The error that fails the task: says so plainly when it was fenced.
    fn fatal_error(&self, what: &str, e: KafkaError) -> ConnectError {
        let code = e.rdkafka_error_code();
        self.fatal(what, code).with_source(e)
    }

    fn fatal(&self, what: &str, code: Option<RDKafkaErrorCode>) -> ConnectError {
        let fenced = is_fencing(code)
            || self
                .producer
                .client()
                .fatal_error()
                .is_some_and(|(code, _)| is_fencing(Some(code)));
        if fenced {
            self.count("fenced");
            ConnectError::fatal(format!(
                "{what}: fenced: another producer started with transactional.id `{}` (this task was started again, here or on another worker); this instance stops so that only one writes",
                self.transactional_id
            ))
            .with_class("ProducerFenced")
        } else {
            ConnectError::fatal(format!(
                "{what}: the transactional producer `{}` failed fatally",
                self.transactional_id
            ))
            .with_class("ProducerFatal")
        }
    }

    /// If the producer has failed fatally (librdkafka reports fencing
    /// through delivery reports too), the error that fails the task.
    pub fn fatal_state(&self) -> Option<ConnectError> {
        let (code, reason) = self.producer.client().fatal_error()?;
        Some(
            self.fatal("producing in a transaction", Some(code))
                .with_source(std::io::Error::other(format!("{code:?}: {reason}"))),
        )
    }

    /// Adds the consumed positions to the transaction (stream tasks): they
    /// become the group's committed offsets if, and only if, it commits.
    pub async fn send_offsets(
        &mut self,
        offsets: TopicPartitionList,
        group: ConsumerGroupMetadata,
    ) -> Result<(), TxnFailure> {
        let group = std::sync::Arc::new(group);
        for attempt in 1..=CALL_ATTEMPTS {
            let (p, tpl, g) = (self.producer.clone(), offsets.clone(), group.clone());
            let result = tokio::task::spawn_blocking(move || {
                p.send_offsets_to_transaction(&tpl, &g, CALL_TIMEOUT)
            })
            .await
            .expect("send_offsets_to_transaction does not panic");
            match result {
                Ok(()) => return Ok(()),
                Err(e) => match classify(&e) {
                    Class::Retry if attempt < CALL_ATTEMPTS => {
                        tracing::warn!(attempt, error = %e, "sending offsets to the transaction failed; retrying");
                        tokio::time::sleep(crate::config::backoff(attempt, Duration::from_secs(5)))
                            .await;
                    }
                    Class::Fatal => {
                        return Err(TxnFailure::Fatal(
                            self.fatal_error("sending offsets to the transaction", e),
                        ));
                    }
                    Class::Retry | Class::Abort => {
                        let cause = ConnectError::retriable("sending offsets to the transaction")
                            .with_class("TransactionAborted")
                            .with_source(e);
                        return Err(self.abort(cause).await);
                    }
                },
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Commits the open transaction.
    pub async fn commit(&mut self) -> Result<(), TxnFailure> {
        for attempt in 1..=CALL_ATTEMPTS {
            let p = self.producer.clone();
            let result = tokio::task::spawn_blocking(move || p.commit_transaction(CALL_TIMEOUT))
                .await
                .expect("commit_transaction does not panic");
            let e = match result {
                Ok(()) => {
                    self.count("committed");
                    return Ok(());
                }
                Err(e) => e,
            };
            match classify(&e) {
                Class::Fatal => {
                    return Err(TxnFailure::Fatal(
                        self.fatal_error("committing the transaction", e),
                    ));
                }
                Class::Abort => {
                    let cause = ConnectError::retriable("committing the transaction")
                        .with_class("TransactionAborted")
                        .with_source(e);
                    return Err(self.abort(cause).await);
                }
                Class::Retry if !is_timeout(&e) && attempt < CALL_ATTEMPTS => {
                    tracing::warn!(attempt, error = %e, "committing the transaction failed; retrying");
                    tokio::time::sleep(crate::config::backoff(attempt, Duration::from_secs(5)))
                        .await;
                }
                Class::Retry => {
                    // The commit may or may not have taken effect. This
                    // producer is not trusted again: a new one with the
                    // same id makes the coordinator settle the transaction.
                    tracing::warn!(error = %e, "the transaction's commit has an unknown outcome; re-creating the producer");
                    self.count("ambiguous");
                    let cause = ConnectError::retriable("committing the transaction")
                        .with_class("TransactionOutcomeUnknown")
                        .with_source(e);
                    return Err(match self.recreate().await {
                        Ok(()) => TxnFailure::Ambiguous(cause),
                        Err(fatal) => TxnFailure::Fatal(fatal),
                    });
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Aborts the open transaction after `cause`; if even that fails, the
    /// producer is re-created, which aborts it on the broker.
    pub async fn abort(&mut self, cause: ConnectError) -> TxnFailure {
        if let Some(fatal) = self.fatal_state() {
            return TxnFailure::Fatal(fatal);
        }
        let p = self.producer.clone();
        let result = tokio::task::spawn_blocking(move || p.abort_transaction(CALL_TIMEOUT))
            .await
            .expect("abort_transaction does not panic");
        self.count("aborted");
        tracing::warn!(cause = %cause.full_message(), "transaction aborted; the batch is redone");
        match result {
            Ok(()) => TxnFailure::Aborted(cause),
            Err(e) if matches!(classify(&e), Class::Fatal) => {
                TxnFailure::Fatal(self.fatal_error("aborting the transaction", e))
            }
            Err(e) => {
                tracing::warn!(error = %e, "aborting failed; re-creating the producer");
                match self.recreate().await {
                    Ok(()) => TxnFailure::Aborted(cause),
                    Err(fatal) => TxnFailure::Fatal(fatal),
                }
            }
        }
    }

    async fn recreate(&mut self) -> Result<(), ConnectError> {
        self.producer = init(
            &self.clients,
            &self.client_id,
            &self.transactional_id,
            &self.overrides,
        )
        .await?;
        Ok(())
    }
}

async fn init(
    clients: &KafkaClients,
    client_id: &str,
    transactional_id: &str,
    overrides: &ConfigMap,
) -> Result<FutureProducer, ConnectError> {
    let producer = clients
        .transactional_producer(client_id, transactional_id, overrides)
        .map_err(|e| ConnectError::fatal("creating the transactional producer").with_source(e))?;
    for attempt in 1..=CALL_ATTEMPTS {
        let p = producer.clone();
        let result = tokio::task::spawn_blocking(move || p.init_transactions(CALL_TIMEOUT))
            .await
            .expect("init_transactions does not panic");
        match result {
            Ok(()) => return Ok(producer),
            Err(e) if matches!(classify(&e), Class::Retry) && attempt < CALL_ATTEMPTS => {
                tracing::warn!(attempt, error = %e, "registering the transactional producer failed; retrying");
                tokio::time::sleep(crate::config::backoff(attempt, Duration::from_secs(5))).await;
            }
            Err(e) => {
                let kind = if matches!(classify(&e), Class::Fatal) {
                    sluice_sdk::ErrorKind::Fatal
                } else {
                    sluice_sdk::ErrorKind::Retriable
                };
                return Err(ConnectError::new(
                    kind,
                    format!(
                        "registering transactional.id `{transactional_id}` with the transaction coordinator (does the cluster support transactions, and may this principal use the id?)"
                    ),
                )
                .with_class("TransactionInitFailed")
                .with_source(e));
            }
        }
    }
    unreachable!("the last attempt returns")
}
