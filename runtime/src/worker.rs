//! The worker: validates connectors, runs their tasks, tracks their status
//! and stops them cleanly.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use sluice_sdk::{ConfigError, ConfigMap, ConnectorType, TaskContext};
use tokio::sync::RwLock;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::config::{CommonConfig, ConnectorSpec, StreamConfig};
use crate::errors::ErrorHandler;
use crate::kafka::KafkaClients;
use crate::metrics::Metrics;
use crate::offsets::OffsetStore;
use crate::plugin::Plugin;
use crate::task::{self, State, StatusCell, TaskEnv, TaskStatus};
use crate::transform::CompiledChain;
use crate::validate::{ValidatedConnector, Validator};

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("connector `{0}` already exists")]
    AlreadyExists(String),
    #[error("invalid config for connector `{name}`: {error}")]
    Invalid { name: String, error: ConfigError },
    #[error("starting connector `{name}`: {message}")]
    Start { name: String, message: String },
    #[error("{0}")]
    Conflict(String),
    /// A request that is wrong for the connector's state or malformed.
    #[error("{0}")]
    BadRequest(String),
    /// Distributed mode: the cluster's topics could not be written or read.
    #[error("{0}")]
    Cluster(String),
}

/// Task configs by task id.
type TaskConfigs = Vec<(u32, ConfigMap)>;

struct TaskRuntime {
    id: u32,
    status: StatusCell,
    cancel: CancellationToken,
    /// See [`TaskEnv::leave_group`].
    leave_group: Arc<std::sync::atomic::AtomicBool>,
    join: JoinHandle<()>,
    config: ConfigMap,
}

struct ConnectorRuntime {
    spec: ConnectorSpec,
    kind: ConnectorType,
    tasks: Vec<TaskRuntime>,
    /// The transform chain the tasks run; a new value is swapped in by each
    /// task at its next batch boundary.
    chain: tokio::sync::watch::Sender<CompiledChain>,
    /// Kafka Connect's target state: paused tasks stop moving records.
    paused: tokio::sync::watch::Sender<bool>,
    /// STOPPED: no tasks, the config kept (offsets may be changed).
    stopped: bool,
    /// Topics the connector has used since creation or the last reset.
    topics: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// The connector is being restarted (status: RESTARTING).
    restarting: bool,
    /// Tasks stopping for a restart, still shown in status and info.
    pending: Vec<PendingTask>,
    /// Distributed mode: tasks another worker of the cluster runs.
    remote: TaskConfigs,
}

/// What a connector's tasks share: transform chain updates, the paused
/// flag, the topics used.
struct SharedWithTasks {
    chain: tokio::sync::watch::Receiver<CompiledChain>,
    paused: tokio::sync::watch::Receiver<bool>,
    topics: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl ConnectorRuntime {
    /// What a new task of this connector is linked to.
    fn links(&self) -> SharedWithTasks {
        SharedWithTasks {
            chain: self.chain.subscribe(),
            paused: self.paused.subscribe(),
            topics: self.topics.clone(),
        }
    }
}

struct PendingTask {
    id: u32,
    config: ConfigMap,
    status: StatusCell,
}

/// Whether stopping tasks leave their consumer group (see
/// [`Worker::stop_tasks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leave {
    Group,
    KeepMembership,
}

/// What a restart will do: see [`Worker::plan_restart`].
pub struct RestartPlan {
    name: String,
    validated: ValidatedConnector,
    /// The connector: all its tasks, created again from its config.
    all: bool,
    /// The tasks restarted (all of them with `all`).
    tasks: Vec<u32>,
}

/// Kafka Connect's target states: what a connector is asked to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetState {
    Running,
    /// Tasks created but not moving records.
    Paused,
    /// No tasks; the config kept.
    Stopped,
}

impl TargetState {
    pub const NAMES: &'static str = "RUNNING, PAUSED, STOPPED";

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "RUNNING" => Some(Self::Running),
            "PAUSED" => Some(Self::Paused),
            "STOPPED" => Some(Self::Stopped),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "RUNNING",
            Self::Paused => "PAUSED",
            Self::Stopped => "STOPPED",
        }
    }
}

/// What a config update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Updated {
    Created,
    /// Only transforms or predicates changed: swapped in without a restart.
    TransformsSwapped,
    /// Other keys changed: the tasks were stopped cleanly and started again.
    Restarted,
    /// Only `tasks.max` changed (with transforms perhaps): tasks were added
    /// or removed; the others went on (those whose task config changed
    /// were restarted).
    TasksResized,
    Unchanged,
}

/// What `GET /connectors/{name}/status` shows.
#[derive(Debug, Clone)]
pub struct ConnectorStatus {
    pub name: String,
    pub kind: ConnectorType,
    pub connector: TaskStatus,
    pub tasks: Vec<(u32, TaskStatus)>,
    /// Distributed mode: the worker running each task that runs elsewhere.
    pub task_workers: BTreeMap<u32, String>,
}

/// Distributed mode: which of a connector's tasks this worker runs, and
/// what the cluster knows of the others (see `herder::distributed`).
/// Standalone workers have none: they run every task.
pub trait TaskPlacement: Send + Sync {
    /// Whether this worker runs the task.
    fn runs_task(&self, connector: &str, task: u32) -> bool;
    /// Whether a task just given to this worker may start now (not while
    /// its previous worker still runs it).
    fn may_start(&self, connector: &str, task: u32) -> bool;
    /// A task another worker runs, and that worker.
    fn remote_task_status(&self, connector: &str, task: u32) -> (TaskStatus, Option<String>);
}

/// The local data plane: starts, supervises and stops the tasks of the
/// connectors it is given. It knows no config store and no cluster; the
/// herder in front of it does.
pub struct Worker {
    pub id: String,
    validator: Validator,
    clients: KafkaClients,
    metrics: Metrics,
    offsets: Arc<OffsetStore>,
    default_partitions: i32,
    shutdown_timeout: Duration,
    connectors: RwLock<BTreeMap<String, ConnectorRuntime>>,
    /// Held while a restart runs, so restarts never interleave.
    restarts: tokio::sync::Mutex<()>,
    /// True while the worker restores and starts its connectors: `/health`
    /// answers 503 until then.
    starting: std::sync::atomic::AtomicBool,
    /// Distributed mode: which tasks this worker runs.
    placement: std::sync::OnceLock<Arc<dyn TaskPlacement>>,
}

pub struct WorkerOptions {
    pub id: String,
    /// Resolves `${env:...}` and `${file:...}` in connector configs.
    pub providers: crate::providers::ConfigProviders,
    /// Directories of native connector plugins (`plugin.path`).
    pub plugin_path: Vec<std::path::PathBuf>,
    pub transforms_library: Option<std::path::PathBuf>,
    pub wasm_cache_dir: Option<std::path::PathBuf>,
    pub clients: KafkaClients,
    pub offsets: OffsetStore,
    pub default_partitions: i32,
    pub shutdown_timeout: Duration,
    pub metrics: Metrics,
}

impl Worker {
    pub fn new(options: WorkerOptions) -> anyhow::Result<Self> {
        Ok(Self {
            id: options.id,
            validator: Validator::build(
                &options.plugin_path,
                options.wasm_cache_dir,
                options.providers,
                options.transforms_library,
                &options.metrics,
            )?,
            clients: options.clients,
            metrics: options.metrics,
            offsets: Arc::new(options.offsets),
            default_partitions: options.default_partitions,
            shutdown_timeout: options.shutdown_timeout,
            connectors: RwLock::new(BTreeMap::new()),
            restarts: tokio::sync::Mutex::new(()),
            starting: std::sync::atomic::AtomicBool::new(false),
            placement: std::sync::OnceLock::new(),
        })
    }

    /// Makes this worker share tasks with others: from now on it runs only
    /// those `placement` gives it.
    pub fn share_tasks(&self, placement: Arc<dyn TaskPlacement>) {
        let _ = self.placement.set(placement);
    }

    /// Whether this worker runs the task: always when standalone.
    fn runs_task(&self, connector: &str, task: u32) -> bool {
        self.placement
            .get()
            .is_none_or(|p| p.runs_task(connector, task))
    }

    /// Distributed mode: starts the tasks this worker was just assigned and
    /// stops (cleanly, their in-flight batches committing) those it no
    /// longer is, after a rebalance of the task slots or a new placement.
    pub async fn reconcile(&self) {
        let mut to_stop = Vec::new();
        let mut to_start = Vec::new();
        {
            let mut connectors = self.connectors.write().await;
            for (name, c) in connectors.iter_mut() {
                if c.stopped || c.restarting {
                    continue;
                }
                let (keep, gone): (Vec<TaskRuntime>, Vec<TaskRuntime>) =
                    std::mem::take(&mut c.tasks)
                        .into_iter()
                        .partition(|t| self.runs_task(name, t.id));
                c.tasks = keep;
                for t in gone {
                    tracing::info!(connector = %name, task = t.id, "task moves to another worker");
                    c.remote.push((t.id, t.config.clone()));
                    to_stop.push((name.clone(), t));
                }
                if c.remote.iter().any(|(id, _)| self.runs_task(name, *id)) {
                    to_start.push((name.clone(), c.spec.clone()));
                }
            }
        }
        // Moving away: leave the group, so the new owner gets the
        // partitions at once.
        self.stop_tasks(to_stop, Leave::Group).await;
        for (name, spec) in to_start {
            let validated = match self.validator.validate(&spec).await {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(connector = %name, error = %e, "cannot start the connector's assigned tasks: its config is not valid on this worker");
                    continue;
                }
            };
            let mut connectors = self.connectors.write().await;
            let Some(c) = connectors.get_mut(&name) else {
                continue;
            };
            if c.stopped || c.restarting || c.spec != spec {
                continue;
            }
            // A task moving here from a live worker starts once that
            // worker has stopped it (the next reconcile).
            let (mine, others): (TaskConfigs, TaskConfigs) = std::mem::take(&mut c.remote)
                .into_iter()
                .partition(|(id, _)| {
                    self.runs_task(&name, *id)
                        && self.placement.get().is_none_or(|p| p.may_start(&name, *id))
                });
            c.remote = others;
            for (id, config) in mine {
                let task = self.spawn_task(&validated, id, config, c.links(), false);
                tracing::info!(connector = %name, task = id, "task assigned to this worker");
                c.tasks.push(task);
            }
            c.tasks.sort_by_key(|t| t.id);
        }
    }

    /// The status of every task this worker runs.
    pub async fn local_task_statuses(&self) -> Vec<(String, u32, TaskStatus)> {
        let connectors = self.connectors.read().await;
        connectors
            .iter()
            .flat_map(|(name, c)| {
                c.tasks
                    .iter()
                    .map(|t| (name.clone(), t.id, t.status.get()))
                    .chain(
                        c.pending
                            .iter()
                            .map(|p| (name.clone(), p.id, p.status.get())),
                    )
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every connector's config and target state, for the config store.
    pub async fn snapshot(&self) -> Vec<(ConnectorSpec, TargetState)> {
        self.connectors
            .read()
            .await
            .values()
            .map(|c| {
                let state = if c.stopped {
                    TargetState::Stopped
                } else if *c.paused.borrow() {
                    TargetState::Paused
                } else {
                    TargetState::Running
                };
                (c.spec.clone(), state)
            })
            .collect()
    }

    /// Marks the worker starting (its connectors not yet restored) or
    /// ready.
    pub fn set_starting(&self, starting: bool) {
        self.starting
            .store(starting, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn is_starting(&self) -> bool {
        self.starting.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn validator(&self) -> &Validator {
        &self.validator
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn clients(&self) -> &KafkaClients {
        &self.clients
    }

    /// The connector's config validated (see [`Validator::validate`]), or
    /// why it is invalid.
    pub async fn validated(&self, spec: &ConnectorSpec) -> Result<ValidatedConnector, WorkerError> {
        self.validator
            .validate(spec)
            .await
            .map_err(|error| WorkerError::Invalid {
                name: spec.name.clone(),
                error,
            })
    }

    pub async fn create(&self, spec: &ConnectorSpec) -> Result<(), WorkerError> {
        self.create_in(spec, TargetState::Running).await
    }

    /// Creates a connector directly in a target state (`initial_state` of
    /// `POST /connectors`): PAUSED tasks start paused, STOPPED has no tasks.
    pub async fn create_in(
        &self,
        spec: &ConnectorSpec,
        target: TargetState,
    ) -> Result<(), WorkerError> {
        if self.connectors.read().await.contains_key(&spec.name) {
            return Err(WorkerError::AlreadyExists(spec.name.clone()));
        }
        let validated = self.validated(spec).await?;
        self.start_in(validated, target).await
    }

    /// Starts a validated connector's tasks.
    pub async fn start(&self, v: ValidatedConnector) -> Result<(), WorkerError> {
        self.start_in(v, TargetState::Running).await
    }

    /// Starts a validated connector in a target state: RUNNING, PAUSED (its
    /// tasks start paused) or STOPPED (no tasks, nothing created, as after
    /// `PUT .../stop`).
    pub async fn start_in(
        &self,
        v: ValidatedConnector,
        target: TargetState,
    ) -> Result<(), WorkerError> {
        let name = v.spec.name.clone();
        let start_error = |message: String| WorkerError::Start {
            name: name.clone(),
            message,
        };
        let topics = v.topics();
        let partitions = v.common.topic_partitions.unwrap_or(self.default_partitions);
        let replication = v.common.topic_replication_factor.unwrap_or(-1);
        let stopped = target == TargetState::Stopped;
        if !stopped {
            self.clients
                .ensure_topics(&topics, partitions, replication)
                .await
                .map_err(|e| start_error(format!("creating topics {topics:?}: {e:#}")))?;
        }
        if matches!(v.plugin, Plugin::Source(_))
            && !stopped
            && task::source::uses_offsets_topic(v.common.delivery_guarantee, &self.offsets)
        {
            let t = self.clients.offsets_topic();
            self.clients
                .ensure_internal_topic(&t.name, t.partitions, t.replication, true)
                .await
                .map_err(|e| start_error(format!("creating the offsets topic: {e:#}")))?;
        }
        if let Some(dlq) = v.common.errors.dlq.as_ref().filter(|_| !stopped) {
            self.clients
                .ensure_topics(
                    std::slice::from_ref(&dlq.topic),
                    partitions,
                    dlq.replication_factor,
                )
                .await
                .map_err(|e| start_error(format!("creating the dead-letter queue: {e:#}")))?;
        }

        let mut connectors = self.connectors.write().await;
        if connectors.contains_key(&name) {
            return Err(WorkerError::AlreadyExists(name));
        }
        let task_configs = match (&v.plugin, stopped) {
            (_, true) => Vec::new(),
            (_, false) => v.task_configs(),
        };
        let (chain, _) = tokio::sync::watch::channel(v.chain.clone());
        let (paused, _) = tokio::sync::watch::channel(target == TargetState::Paused);
        let topics: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>> = Arc::default();
        let mut tasks = Vec::with_capacity(task_configs.len());
        let mut remote = Vec::new();
        for (id, config) in task_configs.into_iter().enumerate() {
            let id = id as u32;
            if !self.runs_task(&name, id) {
                remote.push((id, config));
                continue;
            }
            tasks.push(self.spawn_task(
                &v,
                id,
                config,
                SharedWithTasks {
                    chain: chain.subscribe(),
                    paused: paused.subscribe(),
                    topics: topics.clone(),
                },
                false,
            ));
        }
        tracing::info!(connector = %name, class = %v.common.connector_class, tasks = tasks.len(), state = target.as_str(), "connector started");
        connectors.insert(
            name.clone(),
            ConnectorRuntime {
                spec: v.spec.clone(),
                kind: v.plugin.kind(),
                tasks,
                chain,
                paused,
                stopped,
                topics,
                restarting: false,
                pending: Vec::new(),
                remote,
            },
        );
        drop(connectors);
        Ok(())
    }

    /// Creates or updates a connector (`PUT /connectors/{name}/config`).
    /// The new config is validated whole first: if it is invalid (a module
    /// that does not load, a bad key), nothing changes and the error says
    /// why. A change to transforms or predicates only is swapped in at the
    /// tasks' next batch boundary, without a restart; any other change stops
    /// the tasks cleanly (their in-flight batches commit) and starts new ones.
    pub async fn put(&self, spec: &ConnectorSpec) -> Result<Updated, WorkerError> {
        let current = self
            .connectors
            .read()
            .await
            .get(&spec.name)
            .map(|c| c.spec.clone());
        let Some(current) = current else {
            self.create(spec).await?;
            return Ok(Updated::Created);
        };
        if current.config == spec.config {
            return Ok(Updated::Unchanged);
        }
        let validated = self.validated(spec).await?;
        if self.is_stopped(&spec.name).await == Some(true) {
            if let Some(c) = self.connectors.write().await.get_mut(&spec.name) {
                c.spec = spec.clone();
            }
            return Ok(Updated::Restarted);
        }
        let is_chain_key = |k: &String| k.starts_with("transforms") || k.starts_with("predicates");
        let outside = |c: &ConfigMap| -> ConfigMap {
            c.iter()
                .filter(|(k, _)| !is_chain_key(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        if outside(&current.config) == outside(&spec.config) {
            let mut connectors = self.connectors.write().await;
            let c = connectors
                .get_mut(&spec.name)
                .ok_or_else(|| WorkerError::Start {
                    name: spec.name.clone(),
                    message: "deleted during the update".into(),
                })?;
            c.spec = spec.clone();
            c.chain.send_replace(validated.chain);
            drop(connectors);
            tracing::info!(connector = %spec.name, "transforms updated; tasks swap them in at their next batch boundary");
            return Ok(Updated::TransformsSwapped);
        }
        let without_tasks_max = |c: &ConfigMap| -> ConfigMap {
            let mut c = outside(c);
            c.remove("tasks.max");
            c
        };
        // In a cluster, new tasks need slots placed through the config
        // topic first: a tasks.max change restarts the connector there.
        if self.placement.get().is_none()
            && without_tasks_max(&current.config) == without_tasks_max(&spec.config)
        {
            let chain_changed = current
                .config
                .iter()
                .filter(|(k, _)| is_chain_key(k))
                .ne(spec.config.iter().filter(|(k, _)| is_chain_key(k)));
            return self.resize_tasks(spec, validated, chain_changed).await;
        }
        self.stop_connector(&spec.name).await;
        self.start(validated).await?;
        Ok(Updated::Restarted)
    }

    /// A `tasks.max` change: the plugin's task configs are computed again;
    /// tasks whose config is unchanged go on untouched, tasks no longer
    /// wanted stop (their consumers leave the group, so the survivors take
    /// their partitions at once), and new ones start beside them. A task
    /// whose config changed is replaced.
    async fn resize_tasks(
        &self,
        spec: &ConnectorSpec,
        v: ValidatedConnector,
        chain_changed: bool,
    ) -> Result<Updated, WorkerError> {
        let _one_at_a_time = self.restarts.lock().await;
        let name = spec.name.as_str();
        let deleted = || WorkerError::Start {
            name: name.to_string(),
            message: "deleted during the update".into(),
        };
        let configs = v.task_configs();
        let removed = {
            let mut connectors = self.connectors.write().await;
            let c = connectors.get_mut(name).ok_or_else(deleted)?;
            c.spec = spec.clone();
            if chain_changed {
                c.chain.send_replace(v.chain.clone());
            }
            let (keep, removed): (Vec<TaskRuntime>, Vec<TaskRuntime>) =
                std::mem::take(&mut c.tasks)
                    .into_iter()
                    .partition(|t| configs.get(t.id as usize) == Some(&t.config));
            c.tasks = keep;
            removed
        };
        let removed_ids: Vec<u32> = removed.iter().map(|t| t.id).collect();
        self.stop_tasks(
            removed.into_iter().map(|t| (name.to_string(), t)).collect(),
            Leave::Group,
        )
        .await;
        let mut connectors = self.connectors.write().await;
        let c = connectors.get_mut(name).ok_or_else(deleted)?;
        let mut added = Vec::new();
        if !c.stopped {
            for (id, config) in configs.into_iter().enumerate() {
                let id = id as u32;
                if c.tasks.iter().any(|t| t.id == id) {
                    continue;
                }
                let task = self.spawn_task(&v, id, config, c.links(), false);
                c.tasks.push(task);
                added.push(id);
            }
            c.tasks.sort_by_key(|t| t.id);
        }
        drop(connectors);
        tracing::info!(connector = %name, tasks_max = v.common.tasks_max, stopped = ?removed_ids, started = ?added, "tasks.max changed; the other tasks went on");
        Ok(Updated::TasksResized)
    }

    /// PAUSED: tasks stop moving records but keep their place (sinks keep
    /// their partitions and stay in the group). `false` if unknown.
    pub async fn pause(&self, name: &str) -> Result<bool, WorkerError> {
        let connectors = self.connectors.read().await;
        let Some(c) = connectors.get(name) else {
            return Ok(false);
        };
        if c.stopped {
            return Err(WorkerError::Conflict(format!(
                "Connector {name} is STOPPED; resume it first"
            )));
        }
        c.paused.send_replace(true);
        drop(connectors);
        tracing::info!(connector = %name, "connector paused");
        Ok(true)
    }

    /// RUNNING again, from PAUSED (in place) or STOPPED (tasks started).
    pub async fn resume(&self, name: &str) -> Result<bool, WorkerError> {
        let stopped_spec = {
            let connectors = self.connectors.read().await;
            let Some(c) = connectors.get(name) else {
                return Ok(false);
            };
            if !c.stopped {
                c.paused.send_replace(false);
                None
            } else {
                Some(c.spec.clone())
            }
        };
        let Some(stopped_spec) = stopped_spec else {
            tracing::info!(connector = %name, "connector resumed");
            return Ok(true);
        };
        self.connectors.write().await.remove(name);
        self.create(&stopped_spec).await?;
        tracing::info!(connector = %name, "connector started again after STOPPED");
        Ok(true)
    }

    /// STOPPED: the tasks shut down cleanly (their in-flight batches commit),
    /// the config stays; offsets may be changed while stopped.
    pub async fn stop(&self, name: &str) -> Result<bool, WorkerError> {
        let tasks = {
            let mut connectors = self.connectors.write().await;
            let Some(c) = connectors.get_mut(name) else {
                return Ok(false);
            };
            c.stopped = true;
            c.paused.send_replace(false);
            c.remote.clear();
            std::mem::take(&mut c.tasks)
        };
        self.stop_tasks(
            tasks.into_iter().map(|t| (name.to_string(), t)).collect(),
            Leave::Group,
        )
        .await;
        tracing::info!(connector = %name, "connector stopped");
        Ok(true)
    }

    /// Topics the connector has used (`GET /connectors/{name}/topics`).
    pub async fn topics(&self, name: &str) -> Option<Vec<String>> {
        let connectors = self.connectors.read().await;
        let c = connectors.get(name)?;
        Some(
            c.topics
                .lock()
                .expect("topics lock")
                .iter()
                .cloned()
                .collect(),
        )
    }

    pub async fn reset_topics(&self, name: &str) -> bool {
        match self.connectors.read().await.get(name) {
            Some(c) => {
                c.topics.lock().expect("topics lock").clear();
                true
            }
            None => false,
        }
    }

    /// KIP-875 offsets: sources from the offset store, sinks from their
    /// consumer group (`{kafka_topic, kafka_partition}` / `{kafka_offset}`).
    pub async fn offsets(&self, name: &str) -> Result<Option<Vec<serde_json::Value>>, WorkerError> {
        let Some((spec, kind, _)) = self.spec(name).await else {
            return Ok(None);
        };
        if kind == ConnectorType::Source {
            if self.source_uses_offsets_topic(&spec)? {
                // The topic is the truth (a task may not have run since
                // the worker started).
                let read = self
                    .clients
                    .offsets_topic()
                    .read(&self.clients, name)
                    .await
                    .map_err(|e| WorkerError::Conflict(format!("{e:#}")))?;
                self.offsets
                    .replace(name, read)
                    .map_err(|e| WorkerError::Conflict(e.to_string()))?;
            }
            return Ok(Some(
                self.offsets
                    .all(name)
                    .into_iter()
                    .map(|(p, o)| serde_json::json!({"partition": p, "offset": o}))
                    .collect(),
            ));
        }
        let topics = self.sink_topics(&spec)?;
        let (clients, group) = (self.clients.clone(), task::group_id(name));
        let committed = tokio::task::spawn_blocking(move || clients.group_offsets(&group, &topics))
            .await
            .map_err(|e| WorkerError::Conflict(e.to_string()))?
            .map_err(|e| {
                WorkerError::Conflict(format!("reading the consumer group's offsets: {e:#}"))
            })?;
        Ok(Some(
            committed
                .into_iter()
                .filter_map(|(topic, partition, offset)| {
                    offset.map(|o| {
                        serde_json::json!({
                            "partition": {"kafka_topic": topic, "kafka_partition": partition},
                            "offset": {"kafka_offset": o}
                        })
                    })
                })
                .collect(),
        ))
    }

    fn common_config(&self, spec: &ConnectorSpec) -> Result<CommonConfig, WorkerError> {
        let invalid = |error| WorkerError::Invalid {
            name: spec.name.clone(),
            error,
        };
        self.validator.common_config(spec).map_err(invalid)
    }

    fn sink_topics(&self, spec: &ConnectorSpec) -> Result<Vec<String>, WorkerError> {
        Ok(self.common_config(spec)?.topics)
    }

    fn source_uses_offsets_topic(&self, spec: &ConnectorSpec) -> Result<bool, WorkerError> {
        let guarantee = self.common_config(spec)?.delivery_guarantee;
        Ok(task::source::uses_offsets_topic(guarantee, &self.offsets))
    }

    /// Changes offsets (`PATCH`; an entry with a null offset resets its
    /// partition) or resets them all (`DELETE`: `entries` None). Only while
    /// STOPPED, as in Kafka Connect, so no task races the change.
    pub async fn alter_offsets(
        &self,
        name: &str,
        entries: Option<Vec<serde_json::Value>>,
    ) -> Result<bool, WorkerError> {
        let Some((spec, kind, _)) = self.spec(name).await else {
            return Ok(false);
        };
        if self.is_stopped(name).await != Some(true) {
            return Err(WorkerError::BadRequest(format!(
                "Connectors must be in the STOPPED state before their offsets can be modified: PUT /connectors/{name}/stop first"
            )));
        }
        match (kind, entries) {
            (ConnectorType::Source, None) => self.reset_source_offsets(name, &spec).await?,
            (ConnectorType::Source, Some(entries)) => {
                self.alter_source_offsets(name, &spec, entries).await?
            }
            (ConnectorType::Sink | ConnectorType::Stream, entries) => {
                self.alter_sink_offsets(name, &spec, entries).await?
            }
        }
        tracing::info!(connector = %name, "offsets changed while stopped");
        Ok(true)
    }

    /// DELETE on a source: every partition forgotten, in the offsets topic
    /// (tombstones) and the store.
    async fn reset_source_offsets(
        &self,
        name: &str,
        spec: &ConnectorSpec,
    ) -> Result<(), WorkerError> {
        let bad = WorkerError::BadRequest;
        if self.source_uses_offsets_topic(spec)? {
            // Tombstones for every partition the topic knows.
            let known = self
                .clients
                .offsets_topic()
                .read(&self.clients, name)
                .await
                .map_err(|e| bad(format!("{e:#}")))?;
            let forget: Vec<_> = known.into_keys().map(|k| (k, None)).collect();
            self.clients
                .offsets_topic()
                .write(&self.clients, name, &forget)
                .await
                .map_err(|e| bad(format!("writing the offsets topic: {e:#}")))?;
        }
        self.offsets.reset(name).map_err(|e| bad(e.to_string()))?;
        Ok(())
    }

    /// PATCH on a source: `{partition, offset}` entries, a null offset
    /// forgetting its partition.
    async fn alter_source_offsets(
        &self,
        name: &str,
        spec: &ConnectorSpec,
        entries: Vec<serde_json::Value>,
    ) -> Result<(), WorkerError> {
        let bad = WorkerError::BadRequest;
        let mut changes = Vec::new();
        for e in entries {
            let partition = e
                .get("partition")
                .filter(|p| p.is_object())
                .ok_or_else(|| bad(format!("each entry needs a `partition` object: {e}")))?;
            let offset = match e.get("offset") {
                None | Some(serde_json::Value::Null) => None,
                Some(o) if o.is_object() => Some(o.clone()),
                Some(o) => {
                    return Err(bad(format!("`offset` must be an object or null, got {o}")));
                }
            };
            changes.push((sluice_sdk::source_partition_key(partition), offset));
        }
        if self.source_uses_offsets_topic(spec)? {
            self.clients
                .offsets_topic()
                .write(&self.clients, name, &changes)
                .await
                .map_err(|e| bad(format!("writing the offsets topic: {e:#}")))?;
        }
        self.offsets
            .alter(name, changes)
            .map_err(|e| bad(e.to_string()))?;
        Ok(())
    }

    /// PATCH or DELETE on a sink or stream: its consumer group's offsets,
    /// and first those an exactly-once sink stores with its data.
    async fn alter_sink_offsets(
        &self,
        name: &str,
        spec: &ConnectorSpec,
        entries: Option<Vec<serde_json::Value>>,
    ) -> Result<(), WorkerError> {
        let bad = WorkerError::BadRequest;
        let topics = self.sink_topics(spec)?;
        let (clients, group) = (self.clients.clone(), task::group_id(name));
        let wanted: Vec<(String, i32, Option<i64>)> = match entries {
            None => {
                let (c, g) = (clients.clone(), group.clone());
                tokio::task::spawn_blocking(move || c.group_offsets(&g, &topics))
                    .await
                    .map_err(|e| bad(e.to_string()))?
                    .map_err(|e| bad(format!("{e:#}")))?
                    .into_iter()
                    .map(|(t, p, _)| (t, p, None))
                    .collect()
            }
            Some(entries) => {
                let mut out = Vec::new();
                for e in entries {
                    let topic = e["partition"]["kafka_topic"].as_str().ok_or_else(|| {
                        bad(format!("each entry needs partition.kafka_topic: {e}"))
                    })?;
                    let partition =
                        e["partition"]["kafka_partition"].as_i64().ok_or_else(|| {
                            bad(format!("each entry needs partition.kafka_partition: {e}"))
                        })?;
                    if !topics.iter().any(|t| t == topic) {
                        return Err(bad(format!(
                            "`{topic}` is not one of the connector's topics"
                        )));
                    }
                    let offset = match &e["offset"] {
                        serde_json::Value::Null => None,
                        o => Some(o["kafka_offset"].as_i64().filter(|n| *n >= 0).ok_or_else(
                            || {
                                bad(format!(
                                    "offset.kafka_offset must be a non-negative number: {e}"
                                ))
                            },
                        )?),
                    };
                    out.push((topic.to_string(), partition as i32, offset));
                }
                out
            }
        };
        // A sink that keeps offsets with its data (exactly-once)
        // changes them first: they decide where its tasks resume.
        let v = self
            .validator
            .validate(spec)
            .await
            .map_err(|e| bad(e.to_string()))?;
        if let Plugin::Sink(p) = &v.plugin {
            p.alter_offsets(&v.plugin_config, name, &wanted)
                .await
                .map_err(|e| {
                    bad(format!(
                        "changing the offsets stored in the sink: {}",
                        e.full_message()
                    ))
                })?;
        }
        tokio::task::spawn_blocking(move || clients.set_group_offsets(&group, &wanted))
            .await
            .map_err(|e| bad(e.to_string()))?
            .map_err(|e| bad(format!("committing the offsets: {e:#}")))?;
        Ok(())
    }

    pub async fn is_stopped(&self, name: &str) -> Option<bool> {
        self.connectors.read().await.get(name).map(|c| c.stopped)
    }

    /// Stops a connector's tasks cleanly and creates them again from its
    /// config (`POST /connectors/{name}/restart`), in place: the connector
    /// shows RESTARTING meanwhile, and each new task until it runs.
    pub async fn restart(&self, name: &str) -> Result<bool, WorkerError> {
        match self.plan_restart(name, false, false).await? {
            Some(plan) => Ok(self.execute_restart(plan).await),
            None => Ok(false),
        }
    }

    /// Kafka Connect's restart plan (`POST /connectors/{name}/restart?
    /// includeTasks=&onlyFailed=`): the connector is restarted unless
    /// `only_failed` (a Sluice connector itself never fails), which restarts
    /// all its tasks; with `include_tasks` and `only_failed`, the FAILED tasks
    /// only. What is planned shows RESTARTING at once (in status), until
    /// [`Worker::execute_restart`] has it RUNNING again. The config is
    /// validated first: if it no longer is valid, nothing is marked. `None`
    /// if the connector is unknown; a conflict if it is STOPPED.
    pub async fn plan_restart(
        &self,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
    ) -> Result<Option<RestartPlan>, WorkerError> {
        let Some((spec, stopped)) = self
            .connectors
            .read()
            .await
            .get(name)
            .map(|c| (c.spec.clone(), c.stopped))
        else {
            return Ok(None);
        };
        let stopped_error = || {
            WorkerError::Conflict(format!(
                "Connector {name} is STOPPED; resume it to start its tasks"
            ))
        };
        if stopped {
            return Err(stopped_error());
        }
        let validated = self.validated(&spec).await?;
        let mut connectors = self.connectors.write().await;
        let Some(c) = connectors.get_mut(name) else {
            return Ok(None);
        };
        if c.stopped {
            return Err(stopped_error());
        }
        let all = !only_failed;
        let tasks: Vec<u32> = c
            .tasks
            .iter()
            .filter(|t| all || (include_tasks && t.status.get().state == State::Failed))
            .map(|t| t.id)
            .collect();
        if all {
            c.restarting = true;
        }
        for t in c.tasks.iter().filter(|t| tasks.contains(&t.id)) {
            t.status.set(State::Restarting, None);
        }
        Ok(Some(RestartPlan {
            name: name.to_string(),
            validated,
            all,
            tasks,
        }))
    }

    /// Carries out a [`RestartPlan`]: the planned tasks stop cleanly (their
    /// in-flight batches finish or are redelivered; the others go on) and new
    /// ones start, RESTARTING until they run; with `all`, the tasks are
    /// created again from the connector's config. Restarts run one at a time.
    /// `false` if the connector was deleted or stopped meanwhile.
    pub async fn execute_restart(&self, plan: RestartPlan) -> bool {
        let _one_at_a_time = self.restarts.lock().await;
        let name = plan.name.as_str();
        // The old tasks leave the connector while they stop; their status
        // cells stay visible (RESTARTING) so status never loses a task.
        let old = {
            let mut connectors = self.connectors.write().await;
            let Some(c) = connectors.get_mut(name) else {
                return false;
            };
            let (restart, keep): (Vec<TaskRuntime>, Vec<TaskRuntime>) =
                std::mem::take(&mut c.tasks)
                    .into_iter()
                    .partition(|t| plan.all || plan.tasks.contains(&t.id));
            c.tasks = keep;
            c.pending = restart
                .iter()
                .map(|t| PendingTask {
                    id: t.id,
                    config: t.config.clone(),
                    status: t.status.clone(),
                })
                .collect();
            restart
        };
        self.stop_tasks(
            old.into_iter().map(|t| (name.to_string(), t)).collect(),
            Leave::KeepMembership,
        )
        .await;
        let mut connectors = self.connectors.write().await;
        let Some(c) = connectors.get_mut(name) else {
            return false;
        };
        let pending = std::mem::take(&mut c.pending);
        c.restarting = false;
        if c.stopped {
            return false;
        }
        let v = &plan.validated;
        let configs: Vec<(u32, ConfigMap)> = if plan.all {
            let configs = v.task_configs();
            c.remote.clear();
            let (mine, others): (TaskConfigs, TaskConfigs) = configs
                .into_iter()
                .enumerate()
                .map(|(id, config)| (id as u32, config))
                .partition(|(id, _)| self.runs_task(name, *id));
            c.remote = others;
            mine
        } else {
            pending.into_iter().map(|p| (p.id, p.config)).collect()
        };
        for (id, config) in configs {
            let task = self.spawn_task(v, id, config, c.links(), true);
            c.tasks.push(task);
            tracing::info!(connector = %name, task = id, "task restarted");
        }
        c.tasks.sort_by_key(|t| t.id);
        true
    }

    /// Restarts one task (`POST /connectors/{name}/tasks/{id}/restart`):
    /// its in-flight batch finishes or is redelivered; the others go on. It
    /// shows RESTARTING until it runs again.
    pub async fn restart_task(&self, name: &str, id: u32) -> Result<bool, WorkerError> {
        // A task in the middle of another restart counts: this one follows.
        let status_of = |c: &ConnectorRuntime| {
            c.tasks
                .iter()
                .find(|t| t.id == id)
                .map(|t| t.status.clone())
                .or_else(|| {
                    c.pending
                        .iter()
                        .find(|p| p.id == id)
                        .map(|p| p.status.clone())
                })
        };
        let spec = match self.connectors.read().await.get(name) {
            Some(c) if status_of(c).is_some() => c.spec.clone(),
            _ => return Ok(false),
        };
        let validated = self.validated(&spec).await?;
        match self.connectors.read().await.get(name).and_then(status_of) {
            Some(status) => status.set(State::Restarting, None),
            None => return Ok(false),
        }
        Ok(self
            .execute_restart(RestartPlan {
                name: name.to_string(),
                validated,
                all: false,
                tasks: vec![id],
            })
            .await)
    }

    /// Stops a connector's tasks cleanly and forgets it.
    pub async fn stop_connector(&self, name: &str) -> bool {
        let removed = self.connectors.write().await.remove(name);
        let Some(c) = removed else { return false };
        self.stop_tasks(
            c.tasks.into_iter().map(|t| (name.to_string(), t)).collect(),
            Leave::Group,
        )
        .await;
        true
    }

    fn spawn_task(
        &self,
        v: &ValidatedConnector,
        id: u32,
        config: ConfigMap,
        shared: SharedWithTasks,
        restarting: bool,
    ) -> TaskRuntime {
        let name: Arc<str> = Arc::from(v.spec.name.as_str());
        let status = StatusCell::new(self.metrics.clone(), &name, id);
        if restarting {
            // Until the task runs.
            status.set(State::Restarting, None);
        }
        let cancel = CancellationToken::new();
        let leave_group = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let span = tracing::info_span!("task", connector = %name, task = id);
        let env = TaskEnv {
            connector: name.clone(),
            task_id: id,
            common: v.common.clone(),
            clients: self.clients.clone(),
            metrics: self.metrics.clone(),
            task_metrics: task::TaskMetrics::new(&self.metrics, &name, id),
            cancel: cancel.clone(),
            chain: std::sync::Mutex::new(None),
            chain_updates: shared.chain,
            paused: shared.paused,
            status: status.clone(),
            active_topics: shared.topics,
            leave_group: leave_group.clone(),
        };
        let errors = ErrorHandler::new(
            v.common.errors.clone(),
            name.clone(),
            id,
            self.metrics.clone(),
            self.dlq_producer(v, &name, id, &status),
            cancel.clone(),
        );
        let body = run_task(
            env,
            v.plugin.clone(),
            config.clone(),
            self.offsets.clone(),
            errors,
        );
        TaskRuntime {
            id,
            join: tokio::spawn(supervised(body, status.clone()).instrument(span)),
            status,
            cancel,
            leave_group,
            config,
        }
    }

    /// The producer of the connector's dead-letter queue, if it has one; a
    /// task that cannot have it is FAILED.
    fn dlq_producer(
        &self,
        v: &ValidatedConnector,
        name: &str,
        id: u32,
        status: &StatusCell,
    ) -> Option<rdkafka::producer::FutureProducer> {
        v.common.errors.dlq.as_ref()?;
        match self.clients.producer(
            &format!("sluice-{name}-{id}-dlq"),
            &v.common.producer_overrides,
        ) {
            Ok(p) => Some(p),
            Err(e) => {
                status.set(
                    State::Failed,
                    Some(format!("creating the dead-letter queue producer: {e}")),
                );
                None
            }
        }
    }

    pub async fn names(&self) -> Vec<String> {
        self.connectors.read().await.keys().cloned().collect()
    }

    pub async fn spec(
        &self,
        name: &str,
    ) -> Option<(ConnectorSpec, ConnectorType, Vec<(u32, ConfigMap)>)> {
        let connectors = self.connectors.read().await;
        let c = connectors.get(name)?;
        let mut tasks: Vec<(u32, ConfigMap)> = c
            .tasks
            .iter()
            .map(|t| (t.id, t.config.clone()))
            .chain(c.pending.iter().map(|p| (p.id, p.config.clone())))
            .chain(c.remote.iter().cloned())
            .collect();
        tasks.sort_by_key(|(id, _)| *id);
        Some((c.spec.clone(), c.kind, tasks))
    }

    pub async fn status(&self, name: &str) -> Option<ConnectorStatus> {
        let connectors = self.connectors.read().await;
        let c = connectors.get(name)?;
        let state = if c.stopped {
            State::Stopped
        } else if c.restarting {
            State::Restarting
        } else if *c.paused.borrow() {
            State::Paused
        } else {
            State::Running
        };
        let mut tasks: Vec<(u32, TaskStatus)> = c
            .tasks
            .iter()
            .map(|t| (t.id, t.status.get()))
            .chain(c.pending.iter().map(|p| (p.id, p.status.get())))
            .collect();
        let mut task_workers = BTreeMap::new();
        for (id, _) in &c.remote {
            let (status, worker) = match self.placement.get() {
                Some(placement) => placement.remote_task_status(name, *id),
                None => continue,
            };
            tasks.push((*id, status));
            if let Some(worker) = worker {
                task_workers.insert(*id, worker);
            }
        }
        tasks.sort_by_key(|(id, _)| *id);
        Some(ConnectorStatus {
            name: name.to_string(),
            kind: c.kind,
            connector: TaskStatus { state, trace: None },
            tasks,
            task_workers,
        })
    }

    pub fn source_offsets(&self, name: &str) -> Vec<(serde_json::Value, serde_json::Value)> {
        self.offsets.all(name)
    }

    /// Cancels every task, lets in-flight batches finish (their offsets are
    /// committed only if they were written), and aborts what is still running
    /// after `task.shutdown.graceful.timeout.ms`.
    pub async fn shutdown(&self) {
        let mut connectors = self.connectors.write().await;
        let mut tasks = Vec::new();
        for (name, c) in connectors.iter_mut() {
            tasks.extend(c.tasks.drain(..).map(|t| (name.clone(), t)));
        }
        // A deploy: the members keep their static membership, and the
        // worker's successor takes their partitions back without a rebalance.
        self.stop_tasks(tasks, Leave::KeepMembership).await;
        connectors.clear();
    }

    /// Cancels the tasks (in-flight batches finish and commit what was
    /// written), waits for all of them up to `task.shutdown.graceful.timeout.ms`,
    /// and aborts what is still running then. `leave`: the tasks go away for
    /// good, their consumers leave the group at once; otherwise (restarts,
    /// worker shutdown) they keep their static membership, and successors
    /// rejoining within `session.timeout.ms` cause no rebalance.
    async fn stop_tasks(&self, tasks: Vec<(String, TaskRuntime)>, leave: Leave) {
        for (_, t) in &tasks {
            t.leave_group
                .store(leave == Leave::Group, std::sync::atomic::Ordering::SeqCst);
            t.cancel.cancel();
        }
        let deadline = tokio::time::Instant::now() + self.shutdown_timeout;
        for (name, t) in tasks {
            let mut join = t.join;
            if tokio::time::timeout_at(deadline, &mut join).await.is_err() {
                tracing::warn!(connector = %name, task = t.id, "task did not stop in time; aborting it (its uncommitted batch will be redelivered)");
                join.abort();
            }
        }
    }
}

/// A task from start to end: its transforms instantiated, then the loop of
/// its kind until it stops or fails.
async fn run_task(
    mut env: TaskEnv,
    plugin: Plugin,
    task_config: ConfigMap,
    offsets: Arc<OffsetStore>,
    errors: ErrorHandler,
) -> Result<(), sluice_sdk::ConnectError> {
    let context = TaskContext {
        connector: env.connector.to_string(),
        task_id: env.task_id,
    };
    let chain = env.chain_updates.borrow_and_update().clone();
    if !chain.is_empty() {
        let (metrics, connector, task) =
            (env.metrics.clone(), env.connector.to_string(), env.task_id);
        let instantiated =
            tokio::task::spawn_blocking(move || chain.instantiate(&metrics, &connector, task))
                .await
                .map_err(|e| {
                    sluice_sdk::ConnectError::fatal(format!("instantiating transforms: {e}"))
                })?;
        env.chain = std::sync::Mutex::new(Some(instantiated?));
    }
    env.status.set(State::Running, None);
    tracing::info!("task running");
    match plugin {
        Plugin::Source(p) => {
            let from_topic =
                task::source::uses_offsets_topic(env.common.delivery_guarantee, &offsets);
            let start =
                task::source::start_offsets(&env.clients, &offsets, &env.connector, from_topic)
                    .await?;
            let source = p.create_task(&task_config, context, start)?;
            task::source::run(env, source, offsets, errors).await
        }
        Plugin::Stream => {
            let config = StreamConfig::parse(&task_config, &env.common.topics)
                .map_err(|e| sluice_sdk::ConnectError::fatal(e.to_string()))?;
            task::stream::run(env, config, errors).await
        }
        Plugin::Sink(p) => {
            let sink = p.create_task(&task_config, context)?;
            task::sink::run(env, sink, errors).await
        }
    }
}

/// Runs a task's body; a failure or a panic leaves it FAILED with its
/// trace, never takes the worker down.
async fn supervised(
    body: impl std::future::Future<Output = Result<(), sluice_sdk::ConnectError>>,
    status: StatusCell,
) {
    match AssertUnwindSafe(body).catch_unwind().await {
        Ok(Ok(())) => tracing::info!("task stopped"),
        Ok(Err(e)) => {
            let trace = e.full_message();
            tracing::error!(kind = %e.kind, error = %trace, "task failed");
            status.set(State::Failed, Some(trace));
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(panic = %message, "task panicked");
            status.set(State::Failed, Some(format!("task panicked: {message}")));
        }
    }
}
