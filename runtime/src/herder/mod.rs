//! The herder: the one object between the API (REST, CLI) and the worker,
//! as Kafka Connect's `Herder`. It decides how a change is made and kept:
//! standalone, applied to this worker and written to the config file
//! store; distributed, written to the cluster's config topic for every
//! worker to apply (see [`distributed`]). The worker below it only runs
//! tasks.

pub mod distributed;
mod offsets;
pub mod standalone;

#[doc(hidden)]
pub use offsets::{sink_offset_changes, source_offset_changes};

use std::sync::Arc;
use std::time::Duration;

use crate::config::{ConnectorSpec, DistributedTopics};
use crate::kafka::KafkaClients;
use crate::metrics::Metrics;
use crate::validate::{ValidatedConnector, Validator};
use crate::worker::{ConnectorStatus, TargetState, Updated, Worker, WorkerError};
use distributed::Cluster;

/// How long a stopping worker of a cluster tries to write its tasks' final
/// statuses.
pub const FINAL_STATUS_WAIT: Duration = Duration::from_secs(3);
use standalone::ConfigFileStore;

enum Mode {
    /// Changes apply here; the file store (if any) keeps them.
    Standalone(Option<ConfigFileStore>),
    /// Changes go through the cluster's config topic.
    Distributed(Arc<Cluster>),
}

pub struct Herder {
    worker: Arc<Worker>,
    mode: Mode,
    /// Held from a snapshot of the connectors to its write, so the store
    /// gets them in the order the changes were made.
    persisting: tokio::sync::Mutex<()>,
}

/// Why the connectors could not be restored at start-up.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// The config store cannot be read: the user's to fix.
    #[error("{0}")]
    Store(String),
    /// A connector named on the command line did not start.
    #[error("{0}")]
    Start(WorkerError),
}

/// What `POST /connectors/{name}/restart` did.
pub enum RestartOutcome {
    Unknown,
    /// The restart is done.
    Restarted,
    /// The restart goes on in the background; what is being restarted
    /// shows RESTARTING in this status.
    Accepted(ConnectorStatus),
}

impl Herder {
    /// Standalone mode, its configs kept in `store` if given.
    pub fn standalone(worker: Arc<Worker>, store: Option<std::path::PathBuf>) -> Self {
        worker.start_auto_restarts();
        Self {
            worker,
            mode: Mode::Standalone(store.map(ConfigFileStore::new)),
            persisting: tokio::sync::Mutex::new(()),
        }
    }

    /// Distributed mode: joins the cluster (see [`Cluster::start`]) and
    /// returns once this worker has caught up with its connectors.
    pub async fn distributed(
        worker: Arc<Worker>,
        group_id: &str,
        topics: &DistributedTopics,
        shutdown_timeout: Duration,
    ) -> anyhow::Result<Self> {
        let clients = worker.clients().clone();
        let cluster =
            Cluster::start(worker.clone(), group_id, topics, &clients, shutdown_timeout).await?;
        worker.start_auto_restarts();
        Ok(Self {
            worker,
            mode: Mode::Distributed(cluster),
            persisting: tokio::sync::Mutex::new(()),
        })
    }

    pub fn worker(&self) -> &Arc<Worker> {
        &self.worker
    }

    pub fn worker_id(&self) -> &str {
        &self.worker.id
    }

    pub fn validator(&self) -> &Validator {
        self.worker.validator()
    }

    pub fn metrics(&self) -> &Metrics {
        self.worker.metrics()
    }

    pub fn clients(&self) -> &KafkaClients {
        self.worker.clients()
    }

    pub fn is_starting(&self) -> bool {
        self.worker.is_starting()
    }

    pub fn set_starting(&self, starting: bool) {
        self.worker.set_starting(starting)
    }

    pub async fn names(&self) -> Vec<String> {
        self.worker.names().await
    }

    pub async fn spec(
        &self,
        name: &str,
    ) -> Option<(
        ConnectorSpec,
        sluice_sdk::ConnectorType,
        Vec<(u32, sluice_sdk::ConfigMap)>,
    )> {
        self.worker.spec(name).await
    }

    pub async fn status(&self, name: &str) -> Option<ConnectorStatus> {
        self.worker.status(name).await
    }

    /// The topics the connector has used since it was created or its
    /// topics were last reset; in a cluster, on any worker.
    pub async fn topics(&self, name: &str) -> Option<Vec<String>> {
        match &self.mode {
            Mode::Distributed(cluster) => cluster.topics(name),
            Mode::Standalone(_) => self.worker.topics(name).await,
        }
    }

    pub async fn reset_topics(&self, name: &str) -> bool {
        match &self.mode {
            Mode::Distributed(cluster) => cluster.reset_topics(name).await,
            Mode::Standalone(_) => self.worker.reset_topics(name).await,
        }
    }

    /// Writes the connectors' configs and states to the file store.
    async fn persist(&self) {
        if let Mode::Standalone(Some(store)) = &self.mode {
            let _in_order = self.persisting.lock().await;
            store.write(&self.worker.snapshot().await);
        }
    }

    /// Creates a connector in a target state (`initial_state`).
    pub async fn create(
        &self,
        spec: &ConnectorSpec,
        target: TargetState,
    ) -> Result<(), WorkerError> {
        match &self.mode {
            Mode::Distributed(cluster) => cluster.create(&self.worker, spec, target).await,
            Mode::Standalone(_) => {
                self.worker.create_in(spec, target).await?;
                self.persist().await;
                Ok(())
            }
        }
    }

    /// Creates or updates a connector (see [`Worker::put`]).
    pub async fn put(&self, spec: &ConnectorSpec) -> Result<Updated, WorkerError> {
        match &self.mode {
            Mode::Distributed(cluster) => cluster.put(&self.worker, spec).await,
            Mode::Standalone(_) => {
                let updated = self.worker.put(spec).await?;
                self.persist().await;
                Ok(updated)
            }
        }
    }

    /// Deletes a connector, its tasks stopped cleanly. `false` if unknown.
    pub async fn delete(&self, name: &str) -> Result<bool, WorkerError> {
        match &self.mode {
            Mode::Distributed(cluster) => cluster.delete(&self.worker, name).await,
            Mode::Standalone(_) => {
                let deleted = self.worker.delete_connector(name).await;
                self.persist().await;
                Ok(deleted)
            }
        }
    }

    /// PAUSED, RUNNING (from PAUSED or STOPPED) or STOPPED. `false` if
    /// unknown.
    pub async fn set_target(&self, name: &str, target: TargetState) -> Result<bool, WorkerError> {
        let changed = match &self.mode {
            Mode::Distributed(cluster) => {
                return cluster.set_target(&self.worker, name, target).await;
            }
            Mode::Standalone(_) => match target {
                TargetState::Paused => self.worker.pause(name).await?,
                TargetState::Running => self.worker.resume(name).await?,
                TargetState::Stopped => self.worker.stop(name).await?,
            },
        };
        self.persist().await;
        Ok(changed)
    }

    /// Kafka Connect's restart: without `include_tasks` or `only_failed`,
    /// done before this returns; with them, planned (what is restarted
    /// shows RESTARTING at once) and carried out in the background.
    pub async fn restart(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<RestartOutcome, WorkerError> {
        let in_background = include_tasks || only_failed;
        match &self.mode {
            Mode::Distributed(cluster) => {
                // Every worker restarts the tasks it runs.
                let known = cluster
                    .restart(&self.worker, name, include_tasks, only_failed, None)
                    .await?;
                if !known {
                    return Ok(RestartOutcome::Unknown);
                }
                if !in_background {
                    return Ok(RestartOutcome::Restarted);
                }
                Ok(self
                    .worker
                    .status(name)
                    .await
                    .map_or(RestartOutcome::Unknown, RestartOutcome::Accepted))
            }
            Mode::Standalone(_) if !in_background => Ok(match self.worker.restart(name).await? {
                true => RestartOutcome::Restarted,
                false => RestartOutcome::Unknown,
            }),
            Mode::Standalone(_) => {
                let Some(plan) = self
                    .worker
                    .plan_restart(name, include_tasks, only_failed)
                    .await?
                else {
                    return Ok(RestartOutcome::Unknown);
                };
                let Some(status) = self.worker.status(name).await else {
                    return Ok(RestartOutcome::Unknown);
                };
                let worker = self.worker.clone();
                tokio::spawn(async move {
                    worker.execute_restart(plan).await;
                });
                Ok(RestartOutcome::Accepted(status))
            }
        }
    }

    /// Restarts one task. `false` if the connector or task is unknown.
    pub async fn restart_task(&self, name: &str, id: u32) -> Result<bool, WorkerError> {
        match &self.mode {
            Mode::Distributed(cluster) => {
                let known = self
                    .worker
                    .spec(name)
                    .await
                    .is_some_and(|(_, _, tasks)| tasks.iter().any(|(t, _)| *t == id));
                if !known {
                    return Ok(false);
                }
                cluster
                    .restart(&self.worker, name, false, false, Some(id))
                    .await
            }
            Mode::Standalone(_) => self.worker.restart_task(name, id).await,
        }
    }

    /// Standalone start-up: the connectors of the config store in their
    /// last state (unless `given` names the same connector), then `given`
    /// (the connector files on the command line), RUNNING. A stored
    /// connector that no longer starts is left out, with an error logged;
    /// a given one that does not start is an error.
    pub async fn restore(&self, given: Vec<ValidatedConnector>) -> Result<(), RestoreError> {
        let stored = match &self.mode {
            Mode::Standalone(Some(store)) => store.read().map_err(RestoreError::Store)?,
            _ => Vec::new(),
        };
        let named: Vec<String> = given.iter().map(|v| v.spec.name.clone()).collect();
        for (spec, target) in stored.into_iter().filter(|(s, _)| !named.contains(&s.name)) {
            let name = spec.name.clone();
            let restored = match self.worker.validator().validate(&spec).await {
                Ok(v) => self
                    .worker
                    .start_in(v, target)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match restored {
                Ok(()) => {
                    tracing::info!(connector = %name, state = target.as_str(), "restored connector from the config store");
                }
                Err(e) => {
                    tracing::error!(connector = %name, error = %e, "a stored connector no longer starts; it is left out (and dropped from the config store at the next change): create it again over REST")
                }
            }
        }
        for v in given {
            let name = v.spec.name.clone();
            if let Err(e) = self.worker.start(v).await {
                tracing::error!(connector = %name, error = %e, "connector failed to start");
                return Err(RestoreError::Start(e));
            }
        }
        if !named.is_empty() {
            self.persist().await;
        }
        Ok(())
    }

    /// Stops every task cleanly (see [`Worker::shutdown`]); in a cluster,
    /// reports them stopped (for at most [`FINAL_STATUS_WAIT`]) so other
    /// workers need not wait to take them, and leaves.
    pub async fn shutdown(&self) {
        let local_tasks: Vec<(String, u32)> = self
            .worker
            .local_task_statuses()
            .await
            .into_iter()
            .map(|(connector, task, _)| (connector, task))
            .collect();
        self.worker.shutdown().await;
        if let Mode::Distributed(cluster) = &self.mode {
            // Bounded: with the broker down each status would wait for the
            // producer's timeout. What is not written, the next holder of
            // the task's slot reconciles.
            let reported =
                tokio::time::timeout(FINAL_STATUS_WAIT, cluster.report_all_stopped(local_tasks))
                    .await;
            if reported.is_err() {
                tracing::warn!(
                    wait_ms = FINAL_STATUS_WAIT.as_millis() as u64,
                    "the final task statuses could not all be written (is the broker reachable?); the next holder of each task reconciles them"
                );
            }
            cluster.shutdown();
        }
    }
}
