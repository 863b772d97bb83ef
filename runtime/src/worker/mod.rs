//! The worker: validates connectors, runs their tasks, tracks their status
//! and stops them cleanly.

mod lifecycle;
mod restart;
mod tasks;
mod topics;

pub use topics::ActiveTopics;

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

use crate::config::{ConnectorSpec, StreamConfig};
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
    /// Topics the connector has used since creation or the last reset (its
    /// entry in [`Worker::active_topics`]).
    topics: topics::TopicSet,
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
    topics: topics::TopicSet,
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
    /// Automatic restarts of FAILED tasks, by (connector, task).
    auto_restarts: std::sync::Mutex<std::collections::HashMap<(String, u32), restart::AutoRestart>>,
    /// True while the worker restores and starts its connectors: `/health`
    /// answers 503 until then.
    starting: std::sync::atomic::AtomicBool,
    /// Distributed mode: which tasks this worker runs.
    placement: std::sync::OnceLock<Arc<dyn TaskPlacement>>,
    /// The topics each connector has used, across its restarts.
    active_topics: Arc<ActiveTopics>,
    /// The built-in schema registry (Avro converters without
    /// `schema.registry.url`; `/schema-registry` on the REST listener).
    schema_registry: Arc<crate::schema::registry::builtin::BuiltinRegistry>,
}

pub struct WorkerOptions {
    pub id: String,
    /// Resolves `${env:...}` and `${file:...}` in connector configs.
    pub providers: crate::providers::ConfigProviders,
    /// Directories of native connector plugins (`plugin.path`).
    pub plugin_path: Vec<std::path::PathBuf>,
    /// Where the file connectors may read and write (`file.allowed.paths`).
    pub file_allowed_paths: sluice_connector_file::AllowedPaths,
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
        let schema_registry = Arc::new(
            crate::schema::registry::builtin::BuiltinRegistry::new(Some(options.clients.clone()))
                .map_err(anyhow::Error::msg)?,
        );
        Ok(Self {
            schema_registry,
            id: options.id,
            validator: Validator::build(
                &options.plugin_path,
                options.file_allowed_paths,
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
            auto_restarts: std::sync::Mutex::new(std::collections::HashMap::new()),
            starting: std::sync::atomic::AtomicBool::new(false),
            placement: std::sync::OnceLock::new(),
            active_topics: Arc::default(),
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

    /// Where source offsets are kept (the offsets topic's view, or the
    /// standalone file).
    pub fn offset_store(&self) -> &OffsetStore {
        &self.offsets
    }

    pub fn validator(&self) -> &Validator {
        &self.validator
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The built-in schema registry.
    pub fn schema_registry(&self) -> &Arc<crate::schema::registry::builtin::BuiltinRegistry> {
        &self.schema_registry
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

    /// Topics the connector's tasks on this worker have used
    /// (`GET /connectors/{name}/topics`; in a cluster, the herder adds
    /// those of other workers' tasks).
    pub async fn topics(&self, name: &str) -> Option<Vec<String>> {
        self.connectors.read().await.get(name)?;
        Some(self.active_topics.list(name))
    }

    /// Forgets the connector's topics here; `false` if it is unknown.
    pub async fn reset_topics(&self, name: &str) -> bool {
        if !self.connectors.read().await.contains_key(name) {
            return false;
        }
        self.active_topics.clear(name);
        true
    }

    /// Every connector's topics, shared with the cluster, which publishes
    /// them and forgets those reset elsewhere.
    pub fn active_topics(&self) -> &Arc<ActiveTopics> {
        &self.active_topics
    }

    pub async fn is_stopped(&self, name: &str) -> Option<bool> {
        self.connectors.read().await.get(name).map(|c| c.stopped)
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
}
