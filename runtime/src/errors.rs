//! Error handling, one path for every stage of every task kind: Kafka
//! Connect's `errors.*` keys (tolerance, bounded retries with backoff,
//! logging, a dead-letter queue with context headers), decided from the
//! error's kind.
//!
//! - `Data` errors (this record is bad) are retried never, and then either
//!   fail the task (`errors.tolerance=none`) or are logged, dead-lettered and
//!   skipped (`all`).
//! - `Retriable` errors of a record (a transform that says "try later") are
//!   retried within `errors.retry.timeout` / `errors.retry.max.attempts`,
//!   then treated like `Data` errors.
//! - Infrastructure failures (a database or broker that is unreachable) are
//!   retried within `errors.infrastructure.retry.timeout`, never
//!   dead-lettered, and fail the task when that budget is spent.
//! - `Fatal` errors fail the task.
//!
//! The invariant the task loops keep with this module: a record's offset is
//! committed only once the record was written or its dead-letter record was
//! acknowledged by Kafka.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::message::{Header as KafkaHeader, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sluice_sdk::{ConnectError, ErrorKind, Record};
use tokio_util::sync::CancellationToken;

use crate::config::{DeadLetterQueue, ErrorPolicy, RetryBudget, backoff};
use crate::metrics::Metrics;

/// How long a dead letter waits for room in its producer's queue.
const DEAD_LETTER_QUEUE_TIMEOUT: Duration = Duration::from_secs(60);

/// Where in the flow a failure happened (Kafka Connect's stage names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    TaskPoll,
    KeyConverter,
    ValueConverter,
    HeaderConverter,
    Transformation,
    TaskPut,
    KafkaProduce,
    KafkaConsume,
}

impl Stage {
    pub const ALL: [Stage; 8] = [
        Stage::TaskPoll,
        Stage::KeyConverter,
        Stage::ValueConverter,
        Stage::HeaderConverter,
        Stage::Transformation,
        Stage::TaskPut,
        Stage::KafkaProduce,
        Stage::KafkaConsume,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::TaskPoll => "TASK_POLL",
            Stage::KeyConverter => "KEY_CONVERTER",
            Stage::ValueConverter => "VALUE_CONVERTER",
            Stage::HeaderConverter => "HEADER_CONVERTER",
            Stage::Transformation => "TRANSFORMATION",
            Stage::TaskPut => "TASK_PUT",
            Stage::KafkaProduce => "KAFKA_PRODUCE",
            Stage::KafkaConsume => "KAFKA_CONSUME",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
    }
}

pub struct Retrier<'a> {
    handler: &'a ErrorHandler,
    stage: Stage,
    budget: RetryBudget,
    started: Instant,
    attempts: u32,
}

impl Retrier<'_> {
    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// After a failure: `true` (having waited) if it is retriable and the
    /// budget allows another attempt; `false` otherwise, or when the task is
    /// being stopped.
    pub async fn again(&mut self, e: &ConnectError) -> bool {
        self.attempts += 1;
        let h = self.handler;
        let delay = backoff(self.attempts - 1, h.policy.retry_delay_max);
        let more = e.kind == ErrorKind::Retriable
            && self.budget.allows(self.started, delay)
            && h.policy
                .retry_max_attempts
                .is_none_or(|max| self.attempts < max)
            && !h.cancel.is_cancelled();
        if !more {
            return false;
        }
        h.count_retry(self.stage);
        tracing::warn!(stage = self.stage.as_str(), attempt = self.attempts, delay_ms = delay.as_millis() as u64,
            error = %e.full_message(), "retrying after a retriable failure");
        tokio::select! {
            _ = tokio::time::sleep(delay) => true,
            _ = h.cancel.cancelled() => false,
        }
    }
}

/// What to do after a failed attempt (see [`Retrier::after`]).
pub enum Retry {
    /// Waited out the backoff: try again.
    Again,
    /// The task is stopping: nothing more is tried.
    Stopped,
    /// Not retriable, or the budget is spent (the error then says what
    /// failed and after how many attempts).
    Failed(ConnectError),
}

impl Retrier<'_> {
    /// After a failed attempt at infrastructure `what`: waits and says to
    /// try again while the failure is retriable and the budget allows.
    pub async fn after(&mut self, e: ConnectError, what: &str) -> Retry {
        if e.kind != ErrorKind::Retriable {
            return Retry::Failed(e);
        }
        if self.again(&e).await {
            Retry::Again
        } else if self.handler.is_cancelled() {
            Retry::Stopped
        } else {
            Retry::Failed(infrastructure_exhausted(what, e, self.attempts))
        }
    }
}

/// The one retry loop for infrastructure: evaluates `$operation` (an
/// expression with `.await`s, evaluated anew for each attempt) until it
/// succeeds, retrying retriable failures with backoff within
/// `errors.infrastructure.retry.timeout` and `errors.retry.max.attempts`.
/// `Ok(Some(value))`; `Ok(None)` when the task is stopping; `Err` with a
/// failure that is not retriable (for the caller to tolerate or fail on),
/// or one that outlived the budget, naming `$what` and the attempts made.
///
/// A macro, not a function taking an async closure: the operations borrow
/// the task mutably, and such closures make the task's future not `Send`.
macro_rules! retry_infrastructure {
    ($errors:expr, $stage:expr, $what:expr, $operation:expr) => {{
        let mut retrier = $errors.retrier($stage, true);
        loop {
            match $operation {
                Ok(value) => break Ok(Some(value)),
                Err(e) => match retrier.after(e, $what).await {
                    $crate::errors::Retry::Again => {}
                    $crate::errors::Retry::Stopped => break Ok(None),
                    $crate::errors::Retry::Failed(e) => break Err(e),
                },
            }
        }
    }};
}
pub(crate) use retry_infrastructure;

/// A failure the handler was asked about.
pub struct Failure<'a> {
    /// The input record, if there is one (a failed poll has none).
    pub record: Option<&'a Record>,
    pub stage: Stage,
    /// The component at that stage: connector class or transform alias.
    pub component: &'a str,
    pub error: &'a ConnectError,
    pub attempts: u32,
}

/// Decides, for one task, what each failure means, and writes dead letters.
pub struct ErrorHandler {
    pub policy: ErrorPolicy,
    connector: Arc<str>,
    task: u32,
    metrics: Metrics,
    dlq: Option<FutureProducer>,
    cancel: CancellationToken,
}

impl ErrorHandler {
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    pub fn new(
        policy: ErrorPolicy,
        connector: Arc<str>,
        task: u32,
        metrics: Metrics,
        dlq: Option<FutureProducer>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            policy,
            connector,
            task,
            metrics,
            dlq,
            cancel,
        }
    }

    fn labels(&self) -> [String; 2] {
        [self.connector.to_string(), self.task.to_string()]
    }

    fn count_retry(&self, stage: Stage) {
        let [c, t] = self.labels();
        self.metrics
            .retries
            .with_label_values(&[c.as_str(), t.as_str(), stage.as_str()])
            .inc();
    }

    /// A retry loop for one operation: call [`Retrier::again`] after each
    /// failure; it waits (backoff with jitter) and says whether to try again.
    /// Infrastructure operations use `errors.infrastructure.retry.timeout`,
    /// record-level ones `errors.retry.timeout`; both honour
    /// `errors.retry.max.attempts`.
    pub fn retrier(&self, stage: Stage, infrastructure: bool) -> Retrier<'_> {
        Retrier {
            handler: self,
            stage,
            budget: if infrastructure {
                self.policy.infrastructure_retry
            } else {
                self.policy.retry
            },
            started: Instant::now(),
            attempts: 0,
        }
    }

    /// A record (or poll) failed for good. With `errors.tolerance=none`, or
    /// a fatal error, returns the error that fails the task. Otherwise logs
    /// it if asked, dead-letters it if a DLQ is configured (waiting for
    /// Kafka's acknowledgement), and returns `Ok` so the task skips it.
    pub async fn tolerate_or_fail(&self, f: Failure<'_>) -> Result<(), ConnectError> {
        let [c, t] = self.labels();
        let failure_labels = [
            c.as_str(),
            t.as_str(),
            f.stage.as_str(),
            f.error.class_name(),
        ];
        self.metrics.errors.with_label_values(&failure_labels).inc();
        let at = f
            .record
            .map(Record::coordinates)
            .unwrap_or_else(|| "(no record)".into());
        if f.error.kind == ErrorKind::Fatal || !self.policy.tolerate_all {
            return Err(ConnectError::new(
                f.error.kind,
                format!(
                    "{} failed at stage {} on record {at} ({}): {}",
                    f.component,
                    f.stage.as_str(),
                    f.error.class_name(),
                    f.error.full_message()
                ),
            )
            .with_class(f.error.class_name().to_string()));
        }
        if self.policy.log {
            let message = if self.policy.log_messages {
                f.record.map(|r| format!("{r:?}")).unwrap_or_default()
            } else {
                String::new()
            };
            tracing::error!(stage = f.stage.as_str(), record = %at, class = f.error.class_name(),
                error = %f.error.full_message(), attempts = f.attempts, message, "tolerated a failed record");
        }
        if let (Some(dlq), Some(producer)) = (&self.policy.dlq, &self.dlq) {
            // Until Kafka has the dead letter, the record is not handled and
            // the batch cannot be committed: retry as infrastructure.
            let written: Result<Option<()>, ConnectError> = retry_infrastructure!(
                self,
                Stage::KafkaProduce,
                "writing to the dead-letter queue",
                self.dead_letter(dlq, producer, &f).await
            );
            let written = written?;
            if written.is_none() {
                return Err(ConnectError::retriable(
                    "stopped before the dead-letter queue had the record; the batch is not committed",
                ));
            }
            self.metrics
                .dlq_records
                .with_label_values(&failure_labels)
                .inc();
            self.metrics
                .records
                .with_label_values(&[c.as_str(), t.as_str(), "dlq", "ok"])
                .inc();
        }
        Ok(())
    }

    async fn dead_letter(
        &self,
        dlq: &DeadLetterQueue,
        producer: &FutureProducer,
        f: &Failure<'_>,
    ) -> Result<(), ConnectError> {
        let empty = Record::default();
        let original = f.record.unwrap_or(&empty);
        let (partition, offset) = match f.record {
            Some(r) if r.partition >= 0 => (r.partition.to_string(), r.offset.to_string()),
            _ => ("-1".to_string(), "-1".to_string()),
        };
        let failed_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let attempts = f.attempts.saturating_sub(1).to_string();
        let mut context: Vec<(&str, String)> = Vec::new();
        if dlq.context_headers {
            context.extend([
                ("__connect.errors.topic", original.topic.clone()),
                ("__connect.errors.partition", partition),
                ("__connect.errors.offset", offset),
                (
                    "__connect.errors.connector.name",
                    self.connector.to_string(),
                ),
                ("__connect.errors.task.id", self.task.to_string()),
                ("__connect.errors.stage", f.stage.as_str().to_string()),
                ("__connect.errors.class.name", f.component.to_string()),
                (
                    "__connect.errors.exception.class.name",
                    format!("sluice.{}", f.error.class_name()),
                ),
                (
                    "__connect.errors.exception.message",
                    f.error.message.clone(),
                ),
                (
                    "__connect.errors.exception.stacktrace",
                    f.error.full_message(),
                ),
            ]);
        }
        // Always present: inspect and replay read them.
        context.extend([
            ("x-dead-letter-origin-topic", original.topic.clone()),
            (
                "x-dead-letter-error-class",
                f.error.class_name().to_string(),
            ),
            ("x-dead-letter-retry-count", attempts),
            ("x-dead-letter-failed-at", failed_at),
            ("x-dead-letter-stage", f.stage.as_str().to_string()),
        ]);
        let record = crate::kafka::future_record(
            &dlq.topic,
            original.key.as_deref(),
            original.value.as_deref(),
            original.timestamp,
            dead_letter_headers(original, &context),
        );
        match crate::kafka::send_awaited(producer, record, DEAD_LETTER_QUEUE_TIMEOUT).await {
            Ok(()) => Ok(()),
            Err(e)
                if e.rdkafka_error_code()
                    == Some(rdkafka::error::RDKafkaErrorCode::MessageSizeTooLarge)
                    && original.value.is_some() =>
            {
                // The record cannot fit in Kafka at all: keep everything but
                // the value, and say so, rather than lose the record silently.
                let size = original.value.as_ref().map_or(0, Vec::len).to_string();
                let headers = dead_letter_headers(original, &context).insert(KafkaHeader {
                    key: "x-dead-letter-value-omitted-bytes",
                    value: Some(size.as_bytes()),
                });
                let mut slim: FutureRecord<'_, [u8], [u8]> =
                    FutureRecord::to(&dlq.topic).headers(headers);
                if let Some(k) = &original.key {
                    slim = slim.key(k.as_slice());
                }
                crate::kafka::send_awaited(producer, slim, DEAD_LETTER_QUEUE_TIMEOUT)
                    .await
                    .map_err(|e| {
                        ConnectError::retriable(format!(
                            "writing to the dead-letter queue `{}`",
                            dlq.topic
                        ))
                        .with_class("DeadLetterQueueUnavailable")
                        .with_source(e)
                    })
            }
            // Not acknowledged: the batch must not be committed. Retriable as
            // infrastructure: the batch is redone after backoff.
            Err(e) => Err(ConnectError::retriable(format!(
                "writing to the dead-letter queue `{}`",
                dlq.topic
            ))
            .with_class("DeadLetterQueueUnavailable")
            .with_source(e)),
        }
    }
}

/// The original record's headers, in order, then the dead-letter context.
fn dead_letter_headers(original: &Record, context: &[(&str, String)]) -> OwnedHeaders {
    let mut headers = OwnedHeaders::new_with_capacity(original.headers.len() + context.len() + 1);
    for h in &original.headers {
        headers = headers.insert(KafkaHeader {
            key: &h.key,
            value: h.value.as_deref(),
        });
    }
    for (k, v) in context {
        headers = headers.insert(KafkaHeader {
            key: k,
            value: Some(v.as_bytes()),
        });
    }
    headers
}

/// The task fails: the infrastructure stayed unavailable past its budget.
pub(crate) fn infrastructure_exhausted(what: &str, e: ConnectError, attempts: u32) -> ConnectError {
    let class = e.class_name().to_string();
    ConnectError::new(
        e.kind,
        format!(
            "{what} failed after {attempts} attempt(s), nothing was skipped: {}",
            e.full_message()
        ),
    )
    .with_class(class)
}
