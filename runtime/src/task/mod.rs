//! The task loops: source (poll, transform, produce, commit offsets), sink
//! (consume, transform, put, flush, commit offsets) and stream (consume,
//! transform, produce, commit offsets). All keep one invariant: an offset
//! is committed only for records that were written.

mod consume;
pub use consume::group_id;
mod produce;
pub mod sink;
pub mod source;
mod stages;
pub use stages::Envelopes;
pub mod stream;

use std::sync::{Arc, Mutex};

use serde::Serialize;
use sluice_sdk::{ConnectError, Record};
use tokio_util::sync::CancellationToken;

use crate::config::CommonConfig;
use crate::kafka::KafkaClients;
use crate::metrics::Metrics;
use crate::transform::{CompiledChain, TransformChain, TransformFailure};

/// Kafka Connect's connector and task states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    Unassigned,
    Running,
    Paused,
    Failed,
    Restarting,
    Stopped,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Unassigned,
        State::Running,
        State::Paused,
        State::Failed,
        State::Restarting,
        State::Stopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Unassigned => "UNASSIGNED",
            State::Running => "RUNNING",
            State::Paused => "PAUSED",
            State::Failed => "FAILED",
            State::Restarting => "RESTARTING",
            State::Stopped => "STOPPED",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskStatus {
    pub state: State,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// A task's status, shared between its loop, the worker and the REST API.
#[derive(Clone)]
pub struct StatusCell {
    inner: Arc<Mutex<TaskStatus>>,
    metrics: Metrics,
    labels: [String; 2],
}

impl StatusCell {
    pub fn new(metrics: Metrics, connector: &str, task: u32) -> Self {
        let cell = Self {
            inner: Arc::new(Mutex::new(TaskStatus {
                state: State::Unassigned,
                trace: None,
            })),
            metrics,
            labels: [connector.to_string(), task.to_string()],
        };
        cell.set(State::Unassigned, None);
        cell
    }

    pub fn get(&self) -> TaskStatus {
        self.inner.lock().expect("status lock").clone()
    }

    pub fn set(&self, state: State, trace: Option<String>) {
        *self.inner.lock().expect("status lock") = TaskStatus { state, trace };
        for s in State::ALL {
            self.metrics
                .task_state
                .with_label_values(&[&self.labels[0], &self.labels[1], s.as_str()])
                .set(i64::from(s == state));
        }
    }
}

/// The error class of a data error that names none.
const DEFAULT_DATA_CLASS: &str = "DataError";

/// A task's metric handles, resolved once for its labels rather than at
/// every batch (as `TransformMetrics` does for transforms).
pub struct TaskMetrics {
    labels: [String; 2],
    all: Metrics,
    pub batch_size: prometheus::Histogram,
    pub batch_seconds: prometheus::Histogram,
    pub transform_seconds: prometheus::Histogram,
    pub commit_failures: prometheus::IntCounter,
    /// `sluice_records_total` by (stage, outcome), resolved at first use:
    /// each task kind counts a few of them.
    records: Mutex<Vec<((&'static str, &'static str), prometheus::IntCounter)>>,
}

impl TaskMetrics {
    /// Also creates the task's failure counters at zero (commit failures;
    /// retries, errors and dead letters at every stage; and with
    /// `transactions` each transaction outcome), so dashboards and `rate()`
    /// work before the first failure.
    pub fn new(metrics: &Metrics, connector: &str, task: u32, transactions: bool) -> Self {
        let labels = [connector.to_string(), task.to_string()];
        let pair = [labels[0].as_str(), labels[1].as_str()];
        for stage in crate::errors::Stage::ALL {
            let stage = stage.as_str();
            metrics
                .retries
                .with_label_values(&[pair[0], pair[1], stage]);
            // Errors and dead letters are by class too; the class a data
            // error has unless it names a narrower one stands for them, so
            // sums over classes exist at zero.
            let zero_class = [pair[0], pair[1], stage, DEFAULT_DATA_CLASS];
            metrics.errors.with_label_values(&zero_class);
            metrics.dlq_records.with_label_values(&zero_class);
        }
        if transactions {
            for outcome in crate::kafka::transaction::OUTCOMES {
                metrics
                    .transactions
                    .with_label_values(&[pair[0], pair[1], outcome]);
            }
        }
        Self {
            batch_size: metrics.batch_size.with_label_values(&pair),
            batch_seconds: metrics.batch_seconds.with_label_values(&pair),
            transform_seconds: metrics.transform_seconds.with_label_values(&pair),
            commit_failures: metrics.commit_failures.with_label_values(&pair),
            records: Mutex::new(Vec::new()),
            all: metrics.clone(),
            labels,
        }
    }

    pub fn records(&self, stage: &'static str, outcome: &'static str) -> prometheus::IntCounter {
        let mut resolved = self.records.lock().expect("records lock");
        if let Some((_, c)) = resolved.iter().find(|(k, _)| *k == (stage, outcome)) {
            return c.clone();
        }
        let counter = self.all.records.with_label_values(&[
            self.labels[0].as_str(),
            self.labels[1].as_str(),
            stage,
            outcome,
        ]);
        resolved.push(((stage, outcome), counter.clone()));
        counter
    }
}

/// What every task loop is given.
pub struct TaskEnv {
    pub connector: Arc<str>,
    pub task_id: u32,
    pub common: CommonConfig,
    pub clients: KafkaClients,
    pub metrics: Metrics,
    /// This task's handles of `metrics`.
    pub task_metrics: TaskMetrics,
    pub cancel: CancellationToken,
    /// In a mutex only so `&TaskEnv` is `Sync`; reached through `get_mut`.
    pub chain: Mutex<Option<TransformChain>>,
    /// New chains from config updates, swapped in at a batch boundary.
    pub chain_updates: tokio::sync::watch::Receiver<CompiledChain>,
    /// `true` while the connector is paused.
    pub paused: tokio::sync::watch::Receiver<bool>,
    pub status: StatusCell,
    /// Topics this connector uses, for `GET /connectors/{name}/topics`.
    pub active_topics: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// Set before `cancel` when the task goes away for good (not a
    /// restart): its consumer then leaves the group at once instead of
    /// keeping its static membership for a successor.
    pub leave_group: Arc<std::sync::atomic::AtomicBool>,
    /// The converters with `schemas.enable=true` (`Envelopes::new`).
    pub envelopes: Envelopes,
    /// Partitions of a topic this task creates (`topic.creation.default.partitions`,
    /// else the worker's default).
    pub new_topic_partitions: i32,
    /// Topics this task knows exist (it created or wrote them).
    pub known_topics: std::collections::HashSet<String>,
}

impl TaskEnv {
    /// The `client.id` of the task's Kafka clients.
    fn client_id(&self) -> String {
        format!("sluice-{}-{}", self.connector, self.task_id)
    }

    fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Waits while the connector is paused (the task shows PAUSED). Returns
    /// false if the task is being stopped instead.
    async fn wait_while_paused(&mut self) -> bool {
        self.status.set(State::Paused, None);
        tracing::info!("paused");
        loop {
            if !*self.paused.borrow_and_update() {
                break;
            }
            tokio::select! {
                _ = self.cancel.cancelled() => return false,
                changed = self.paused.changed() => if changed.is_err() { return false },
            }
        }
        self.status.set(State::Running, None);
        tracing::info!("resumed");
        true
    }

    fn labels(&self) -> [String; 2] {
        [self.connector.to_string(), self.task_id.to_string()]
    }

    fn note_topics<'a>(&self, topics: impl Iterator<Item = &'a str>) {
        let mut active = self.active_topics.lock().expect("topics lock");
        for t in topics {
            if !active.contains(t) {
                active.insert(t.to_string());
            }
        }
    }

    /// Creates the topics of `records` that this task has not written yet
    /// and that do not exist, as Kafka Connect does for sources whose topics
    /// are known only from their records (a CDC source's tables). The
    /// embedded broker has no automatic creation, and a real one may have
    /// it off.
    async fn ensure_topics<'a>(
        &mut self,
        topics: impl Iterator<Item = &'a str>,
    ) -> Result<(), ConnectError> {
        let new: Vec<String> = topics
            .filter(|t| !self.known_topics.contains(*t))
            .map(str::to_string)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let replication = self.common.topic_replication_factor.unwrap_or(-1);
        self.clients
            .ensure_topics(&new, self.new_topic_partitions, replication)
            .await
            .map_err(|e| {
                ConnectError::retriable(format!("creating topics {new:?}: {e:#}"))
                    .with_class("TopicCreationFailed")
            })?;
        self.known_topics.extend(new);
        Ok(())
    }

    fn observe_batch(&self, n: usize) {
        self.task_metrics.batch_size.observe(n as f64);
    }

    /// The time a batch took, from consumed or polled to committed.
    fn observe_batch_time(&self, started: std::time::Instant) {
        self.task_metrics
            .batch_seconds
            .observe(started.elapsed().as_secs_f64());
    }

    /// Exports what a source task measures about its source.
    fn export_gauges(&self, gauges: Vec<sluice_sdk::SourceGauge>) {
        for g in gauges {
            if let Some(family) = self.metrics.source_gauge(g.name, g.help) {
                family
                    .with_label_values(&[&*self.connector, &self.task_id.to_string()])
                    .set(g.value);
            }
        }
    }

    /// Drops a stopped task's gauges, so no stale value stays exported.
    fn forget_gauges(&self, gauges: Vec<sluice_sdk::SourceGauge>) {
        for g in gauges {
            if let Some(family) = self.metrics.source_gauge(g.name, g.help) {
                let _ = family.remove_label_values(&[&*self.connector, &self.task_id.to_string()]);
            }
        }
    }

    fn count(&self, stage: &'static str, outcome: &'static str, n: usize) {
        self.task_metrics.records(stage, outcome).inc_by(n as u64);
    }

    /// At a batch boundary: if the connector's transforms were updated,
    /// instantiate the new chain and swap it in. If the new chain cannot be
    /// instantiated, the old one keeps running and the reason is logged.
    async fn swap_chain_if_updated(&mut self) {
        if !self.chain_updates.has_changed().unwrap_or(false) {
            return;
        }
        let compiled = self.chain_updates.borrow_and_update().clone();
        let (metrics, connector, task) =
            (self.metrics.clone(), self.connector.clone(), self.task_id);
        let result = tokio::task::spawn_blocking(move || {
            if compiled.is_empty() {
                Ok(None)
            } else {
                compiled.instantiate(&metrics, &connector, task).map(Some)
            }
        })
        .await;
        match result {
            Ok(Ok(chain)) => {
                *self.chain.get_mut().expect("chain lock") = chain;
                tracing::info!("transform chain updated at a batch boundary");
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e.full_message(), "the updated transform chain failed to start; the previous one keeps running")
            }
            Err(e) => {
                tracing::error!(error = %e, "the updated transform chain failed to start; the previous one keeps running")
            }
        }
    }

    /// Runs the chain on a blocking thread (WASM calls are CPU-bound and may
    /// run up to their time limit).
    async fn transform(
        &mut self,
        records: Vec<Record>,
    ) -> Result<Vec<Result<Vec<Record>, TransformFailure>>, ConnectError> {
        let Some(mut chain) = self.chain.get_mut().expect("chain lock").take() else {
            return Ok(records.into_iter().map(|r| Ok(vec![r])).collect());
        };
        let timer = std::time::Instant::now();
        let (chain, results) = tokio::task::spawn_blocking(move || {
            let results = chain.apply(records);
            (chain, results)
        })
        .await
        .map_err(|e| ConnectError::fatal(format!("transform thread failed: {e}")))?;
        *self.chain.get_mut().expect("chain lock") = Some(chain);
        self.task_metrics
            .transform_seconds
            .observe(timer.elapsed().as_secs_f64());
        Ok(results)
    }
}
