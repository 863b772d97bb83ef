//! Distributed mode (`sluice distributed WORKER.json`): workers with the
//! same `group.id` share connectors and tasks, with Kafka as the
//! coordination engine.
//!
//! - The config topic (`config.storage.topic`, one partition, compacted)
//!   holds connector configs with their task placement, target states and
//!   restart requests. Every worker replays it from the start and applies
//!   each record, in log order, to its own [`Worker`] core; a REST change
//!   on any worker is a record written there, answered once this worker
//!   has applied it.
//! - The status topic (`status.storage.topic`) holds each task's status and
//!   worker, and the task slots each worker holds.
//! - The task slots topic (`task.slots.topic`) is never written: its
//!   partitions are task slots, consumed by every worker in the group
//!   `group.id` with the cooperative-sticky assignor and static membership.
//!   Kafka's group coordinator decides which worker holds which slot; a
//!   worker runs the tasks placed in its slots. Slots move when a worker
//!   joins, leaves, or is declared dead after `session.timeout.ms`; a
//!   revoked slot's tasks are stopped before the revocation completes, so
//!   the next holder never overlaps them.

mod records;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientContext, Message, Offset, TopicPartitionList};
use serde_json::{Value, json};

use crate::config::{ConnectorSpec, DistributedTopics};
use crate::kafka::KafkaClients;
use crate::task::{State, TaskStatus};
use crate::worker::{ActiveTopics, TargetState, TaskPlacement, Updated, Worker, WorkerError};
use records::{ConfigKey, StatusKey};

/// How long a REST change waits for this worker to apply its record.
const APPLY_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the statuses of this worker's tasks are checked for changes
/// to publish.
const STATUS_INTERVAL: Duration = Duration::from_millis(500);

/// A cluster topic's records in order: (offset, key, value).
type TopicRecords = tokio::sync::mpsc::UnboundedReceiver<(i64, String, Option<Vec<u8>>)>;

/// How long slot holders and placements must stay unchanged before the
/// tasks are evened out (a cooperative rebalance takes two rounds).
const SETTLE: Duration = Duration::from_secs(3);

/// The topics, once checked or created.
struct Topics {
    config: String,
    status: String,
    slots: String,
}

/// What this worker knows of the cluster, from the two topics and its
/// slot assignment.
#[derive(Default)]
struct View {
    /// Each connector's task placement: task id -> slot.
    placements: HashMap<String, Vec<u32>>,
    targets: HashMap<String, TargetState>,
    /// The slots Kafka's coordinator assigned to this worker.
    owned: BTreeSet<u32>,
    /// Slot -> the worker that last said it holds it.
    slot_owners: BTreeMap<u32, String>,
    worker_slots: BTreeMap<String, Vec<u32>>,
    statuses: HashMap<(String, u32), (TaskStatus, String)>,
    /// The topics each connector's tasks have used, on any worker.
    topics: HashMap<String, BTreeSet<String>>,
    /// When slot holders or placements last changed, until the tasks were
    /// evened out after it.
    unsettled_since: Option<std::time::Instant>,
}

impl View {
    /// A worker says which slots it holds now. The latest claim of a slot
    /// wins: the status topic's order follows the coordinator's order of
    /// assignments, so a dead worker's old claims are overridden as soon
    /// as the slots' new holders publish theirs.
    fn claim(&mut self, worker: &str, slots: Vec<u32>) {
        if let Some(old) = self.worker_slots.remove(worker) {
            for s in old {
                if self.slot_owners.get(&s).is_some_and(|w| w == worker) {
                    self.slot_owners.remove(&s);
                }
            }
        }
        for s in &slots {
            self.slot_owners.insert(*s, worker.to_string());
        }
        self.unsettled_since = Some(std::time::Instant::now());
        if !slots.is_empty() {
            self.worker_slots.insert(worker.to_string(), slots);
        }
    }
}

pub struct Cluster {
    worker_id: String,
    topics: Topics,
    slot_count: u32,
    producer: FutureProducer,
    view: std::sync::Mutex<View>,
    /// The offset of the next config record to apply.
    applied: tokio::sync::watch::Sender<i64>,
    /// What applying a config record did, by offset, for the REST change
    /// that wrote it.
    outcomes: std::sync::Mutex<BTreeMap<i64, Result<Option<Updated>, String>>>,
    stop: Arc<AtomicBool>,
    /// Tasks this worker should run that another live worker still showed
    /// running, since when: they start once it reports them stopped.
    deferred: std::sync::Mutex<HashMap<(String, u32), std::time::Instant>>,
    /// Longest a task waits for its previous worker to report it stopped.
    handover_timeout: Duration,
    /// The topics this worker's tasks have used (the worker's own), which
    /// it publishes; a reset seen in the status topic forgets them here.
    active_topics: Arc<ActiveTopics>,
}

/// A slot assignment change, from librdkafka's rebalance callback.
struct SlotsChanged {
    owned: BTreeSet<u32>,
    /// Set for a revocation: the callback waits for the tasks to stop.
    done: Option<std::sync::mpsc::SyncSender<()>>,
}

struct SlotContext {
    events: tokio::sync::mpsc::UnboundedSender<SlotsChanged>,
    /// Longest a revocation waits for its tasks to stop.
    stop_timeout: Duration,
}

impl ClientContext for SlotContext {}

impl ConsumerContext for SlotContext {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(revoked) = rebalance else {
            return;
        };
        // The tasks of revoked slots stop before the slots are released.
        let gone = slot_numbers(revoked);
        let owned = consumer
            .assignment()
            .map(|a| slot_numbers(&a))
            .unwrap_or_default()
            .difference(&gone)
            .copied()
            .collect();
        let (done, wait) = std::sync::mpsc::sync_channel(1);
        if self
            .events
            .send(SlotsChanged {
                owned,
                done: Some(done),
            })
            .is_ok()
        {
            let _ = wait.recv_timeout(self.stop_timeout);
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Error(e) = rebalance {
            tracing::warn!(error = %e, "task slot rebalance error");
        }
        let owned = consumer
            .assignment()
            .map(|a| slot_numbers(&a))
            .unwrap_or_default();
        let _ = self.events.send(SlotsChanged { owned, done: None });
    }
}

fn slot_numbers(tpl: &TopicPartitionList) -> BTreeSet<u32> {
    tpl.elements()
        .iter()
        .filter_map(|e| u32::try_from(e.partition()).ok())
        .collect()
}

fn cluster_error(what: &str, e: impl std::fmt::Display) -> WorkerError {
    WorkerError::Cluster(format!("{what}: {e}"))
}

/// Checks or creates the cluster's three topics; returns the number of
/// task slots.
async fn ensure_topics(clients: &KafkaClients, topics: &DistributedTopics) -> anyhow::Result<u32> {
    let (config_topic, status_topic) = (&topics.config, &topics.status);
    let partitions = clients
        .ensure_internal_topic(config_topic, 1, topics.config_replication_factor, true)
        .await
        .map_err(|e| anyhow::anyhow!("config.storage.topic `{config_topic}`: {e:#}"))?;
    if partitions != 1 {
        anyhow::bail!(
            "config.storage.topic `{config_topic}` has {partitions} partitions; it must have exactly one, so every worker applies changes in the same order"
        );
    }
    clients
        .ensure_internal_topic(status_topic, 1, topics.status_replication_factor, true)
        .await
        .map_err(|e| anyhow::anyhow!("status.storage.topic `{status_topic}`: {e:#}"))?;
    let slot_count = clients
        .ensure_internal_topic(
            &topics.slots,
            topics.slots_partitions,
            topics.slots_replication_factor,
            false,
        )
        .await
        .map_err(|e| anyhow::anyhow!("task.slots.topic `{}`: {e:#}", topics.slots))?
        as u32;
    Ok(slot_count)
}

impl Cluster {
    /// Joins the cluster: checks (or creates) the topics, replays the
    /// config topic into `worker`, then joins the task slot group. Returns
    /// once this worker has caught up with the cluster's connectors.
    pub async fn start(
        worker: Arc<Worker>,
        group_id: &str,
        topics: &DistributedTopics,
        clients: &KafkaClients,
        shutdown_timeout: Duration,
    ) -> anyhow::Result<Arc<Cluster>> {
        let (config_topic, status_topic) = (topics.config.clone(), topics.status.clone());
        let slot_count = ensure_topics(clients, topics).await?;
        let worker_id = worker.id.clone();
        let producer = clients.producer(
            &format!("sluice-worker-{worker_id}-cluster"),
            &Default::default(),
        )?;
        let (applied, _) = tokio::sync::watch::channel(0);
        let cluster = Arc::new(Cluster {
            worker_id: worker_id.clone(),
            topics: Topics {
                config: config_topic.clone(),
                status: status_topic.clone(),
                slots: topics.slots.clone(),
            },
            slot_count,
            producer,
            view: Default::default(),
            applied,
            outcomes: Default::default(),
            stop: Arc::new(AtomicBool::new(false)),
            deferred: Default::default(),
            handover_timeout: shutdown_timeout + Duration::from_secs(10),
            active_topics: worker.active_topics().clone(),
        });
        worker.share_tasks(cluster.clone());

        cluster.replay_config(&worker, clients, group_id).await?;

        // Statuses and slot holders, kept up to date.
        let status_reader = clients.tool_consumer(&format!("{group_id}-status-reader"))?;
        let mut statuses = cluster.read_topic(status_reader, &status_topic, "status")?;
        let viewer = cluster.clone();
        tokio::spawn(async move {
            while let Some((_, key, value)) = statuses.recv().await {
                viewer.apply_status(&key, value.as_deref());
            }
        });

        cluster.join_slot_group(&worker, clients, group_id, shutdown_timeout)?;
        tokio::spawn(cluster.clone().balance_tasks(worker.clone()));
        tokio::spawn(cluster.clone().publish_statuses(worker));
        tracing::info!(group.id = %group_id, worker_id = %worker_id, slots = slot_count, "joined the cluster");
        Ok(cluster)
    }

    /// Replays the config topic from the start into `worker`, and keeps
    /// applying it; returns once this worker has caught up.
    async fn replay_config(
        self: &Arc<Self>,
        worker: &Arc<Worker>,
        clients: &KafkaClients,
        group_id: &str,
    ) -> anyhow::Result<()> {
        // The config topic, from the start, applied in order.
        let reader = clients.tool_consumer(&format!("{group_id}-config-reader"))?;
        let config_topic = &self.topics.config;
        let end = tokio::task::block_in_place(|| {
            reader.fetch_watermarks(config_topic, 0, Duration::from_secs(30))
        })
        .map_err(|e| anyhow::anyhow!("reading config.storage.topic `{config_topic}`: {e}"))?
        .1;
        let records = self.read_topic(reader, config_topic, "config")?;
        tokio::spawn(self.clone().apply_config(worker.clone(), records, end));
        tracing::info!(topic = %config_topic, records = end, "replaying the cluster's config");
        let mut applied = self.applied.subscribe();
        applied
            .wait_for(|next| *next >= end)
            .await
            .map_err(|_| anyhow::anyhow!("the config topic reader stopped"))?;
        Ok(())
    }

    /// Joins the task slot group: Kafka's coordinator says which slots are
    /// this worker's; each change starts and stops tasks (a revocation
    /// waits for them to stop) and is published to the status topic.
    fn join_slot_group(
        self: &Arc<Self>,
        worker: &Arc<Worker>,
        clients: &KafkaClients,
        group_id: &str,
        shutdown_timeout: Duration,
    ) -> anyhow::Result<()> {
        // The task slots: Kafka's coordinator says which are this worker's.
        let (events, mut changes) = tokio::sync::mpsc::unbounded_channel();
        let consumer = clients.coordination_consumer(
            group_id,
            &self.worker_id,
            SlotContext {
                events,
                stop_timeout: shutdown_timeout + Duration::from_secs(10),
            },
        )?;
        consumer.subscribe(&[self.topics.slots.as_str()])?;
        let stop = self.stop.clone();
        std::thread::Builder::new()
            .name("task-slots".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // Serves the group protocol; the topic holds no records.
                    if let Some(Err(e)) = consumer.poll(Duration::from_millis(200)) {
                        // FENCED_INSTANCE_ID: another live worker has this
                        // worker.id.
                        tracing::error!(error = %e, "task slot group error (is worker.id unique in the cluster?)");
                        std::thread::sleep(Duration::from_secs(1));
                    }
                }
            })?;
        let assigner = self.clone();
        let assigned_worker = worker.clone();
        tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                let moved = {
                    let mut view = assigner.view.lock().expect("view lock");
                    let moved = view.owned != change.owned;
                    view.owned = change.owned.clone();
                    moved
                };
                if moved {
                    tracing::info!(slots = ?change.owned, "task slots assigned to this worker");
                    assigned_worker.reconcile().await;
                    let slots: Vec<u32> = change.owned.iter().copied().collect();
                    assigner
                        .publish_status(
                            &records::worker_key(&assigner.worker_id),
                            json!({"slots": slots}),
                        )
                        .await;
                }
                if let Some(done) = change.done {
                    let _ = done.send(());
                }
            }
        });
        Ok(())
    }

    /// Stops the background readers (tasks are stopped by the worker).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Reads partition 0 of `topic` from the start, forever, on a thread of
    /// its own: (offset, key, value) in order.
    fn read_topic(
        &self,
        consumer: BaseConsumer,
        topic: &str,
        what: &'static str,
    ) -> anyhow::Result<TopicRecords> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(topic, 0, Offset::Beginning)?;
        consumer.assign(&tpl)?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let stop = self.stop.clone();
        std::thread::Builder::new()
            .name(format!("{what}-topic"))
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match consumer.poll(Duration::from_millis(200)) {
                        Some(Ok(m)) => {
                            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
                            if tx.send((m.offset(), key, m.payload().map(<[u8]>::to_vec))).is_err() {
                                return;
                            }
                        }
                        Some(Err(e)) => {
                            tracing::warn!(topic = what, error = %e, "reading the cluster's topic failed; retrying")
                        }
                        None => {}
                    }
                }
            })?;
        Ok(rx)
    }

    /// Applies config records to this worker, in log order.
    async fn apply_config(
        self: Arc<Self>,
        worker: Arc<Worker>,
        mut records: TopicRecords,
        caught_up_at: i64,
    ) {
        while let Some((offset, key, value)) = records.recv().await {
            // Restart requests are for the tasks running when they were
            // made; compaction keeps the last one of each connector forever.
            let outcome = if offset < caught_up_at
                && matches!(records::parse_config_key(&key), Some(ConfigKey::Restart(_)))
            {
                Ok(None)
            } else {
                self.apply_config_record(&worker, &key, value.as_deref())
                    .await
            };
            if let Err(e) = &outcome {
                tracing::error!(key = %key, offset, error = %e, "could not apply a config record on this worker");
            }
            {
                let mut outcomes = self.outcomes.lock().expect("outcomes lock");
                outcomes.insert(offset, outcome);
                // Only recent ones are waited for.
                while outcomes.len() > 1000 {
                    outcomes.pop_first();
                }
            }
            self.applied.send_replace(offset + 1);
        }
    }

    async fn apply_config_record(
        &self,
        worker: &Arc<Worker>,
        key: &str,
        value: Option<&[u8]>,
    ) -> Result<Option<Updated>, String> {
        let Some(parsed) = records::parse_config_key(key) else {
            tracing::debug!(key, "config record of another kind; skipped");
            return Ok(None);
        };
        let value: Option<Value> = match value {
            Some(bytes) => Some(
                serde_json::from_slice(bytes)
                    .map_err(|e| format!("the record's value is not JSON: {e}"))?,
            ),
            None => None,
        };
        match (parsed, value) {
            (ConfigKey::Connector(name), Some(v)) => self.apply_connector(worker, name, &v).await,
            (ConfigKey::Connector(name), None) => {
                self.apply_deletion(worker, name).await;
                Ok(None)
            }
            (ConfigKey::TargetState(name), Some(v)) => self.apply_target(worker, name, &v).await,
            (ConfigKey::TargetState(name), None) => {
                self.view.lock().expect("view lock").targets.remove(name);
                Ok(None)
            }
            (ConfigKey::Restart(name), Some(v)) => self.apply_restart(worker, name, &v).await,
            (ConfigKey::Restart(_), None) => Ok(None),
        }
    }

    /// A connector's config with its task placement: created or updated
    /// here, and this worker's share of its tasks started or stopped.
    async fn apply_connector(
        &self,
        worker: &Arc<Worker>,
        name: &str,
        v: &Value,
    ) -> Result<Option<Updated>, String> {
        let spec = ConnectorSpec::from_json(&json!({"name": name, "config": v["properties"]}))
            .map_err(|e| format!("connector `{name}`: {e}"))?;
        let slots: Vec<u32> = v["slots"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_u64().map(|s| s as u32))
                    .collect()
            })
            .unwrap_or_default();
        let target = {
            let mut view = self.view.lock().expect("view lock");
            view.placements.insert(name.to_string(), slots);
            view.unsettled_since = Some(std::time::Instant::now());
            view.targets
                .get(name)
                .copied()
                .unwrap_or(TargetState::Running)
        };
        let outcome = if worker.spec(name).await.is_some() {
            worker.put(&spec).await
        } else {
            worker
                .create_in(&spec, target)
                .await
                .map(|()| Updated::Created)
        };
        // The placement may have changed even if the config did not.
        worker.reconcile().await;
        outcome.map(Some).map_err(|e| e.to_string())
    }

    /// A connector deleted: its tasks here stop, the cluster forgets it.
    async fn apply_deletion(&self, worker: &Arc<Worker>, name: &str) {
        {
            let mut view = self.view.lock().expect("view lock");
            view.placements.remove(name);
            view.targets.remove(name);
            view.statuses.retain(|(c, _), _| c != name);
            view.topics.remove(name);
        }
        worker.delete_connector(name).await;
        tracing::info!(connector = %name, "connector deleted");
    }

    /// A connector's target state: RUNNING, PAUSED or STOPPED here.
    async fn apply_target(
        &self,
        worker: &Arc<Worker>,
        name: &str,
        v: &Value,
    ) -> Result<Option<Updated>, String> {
        let state = v["state"].as_str().unwrap_or_default();
        let target = TargetState::parse(state).ok_or_else(|| {
            format!(
                "target state `{state}` of `{name}` is not one of {}",
                TargetState::NAMES
            )
        })?;
        self.view
            .lock()
            .expect("view lock")
            .targets
            .insert(name.to_string(), target);
        let changed = match target {
            TargetState::Running => worker.resume(name).await,
            TargetState::Paused => worker.pause(name).await,
            TargetState::Stopped => worker.stop(name).await,
        };
        changed.map(|_| None).map_err(|e| e.to_string())
    }

    /// A restart request: this worker restarts the connector's tasks it
    /// runs (`task`: only that one), in the background, so the log goes on
    /// being applied meanwhile.
    async fn apply_restart(
        &self,
        worker: &Arc<Worker>,
        name: &str,
        v: &Value,
    ) -> Result<Option<Updated>, String> {
        let include_tasks = v["include-tasks"].as_bool().unwrap_or(false);
        let only_failed = v["only-failed"].as_bool().unwrap_or(false);
        let task = v["task"].as_u64().map(|t| t as u32);
        // Each worker restarts the tasks it runs; in the background,
        // so the log goes on being applied meanwhile.
        let planned = match task {
            Some(id) => {
                let local = worker
                    .local_task_statuses()
                    .await
                    .iter()
                    .any(|(c, t, _)| c == name && *t == id);
                local.then_some(None)
            }
            None => worker
                .plan_restart(name, include_tasks, only_failed)
                .await
                .map_err(|e| e.to_string())?
                .map(Some),
        };
        if let Some(plan) = planned {
            let worker = worker.clone();
            let name = name.to_string();
            tokio::spawn(async move {
                match (plan, task) {
                    (Some(plan), _) => {
                        worker.execute_restart(plan).await;
                    }
                    (None, Some(id)) => {
                        if let Err(e) = worker.restart_task(&name, id).await {
                            tracing::error!(connector = %name, task = id, error = %e, "task restart failed");
                        }
                    }
                    (None, None) => {}
                }
            });
        }
        Ok(None)
    }

    fn apply_status(&self, key: &str, value: Option<&[u8]>) {
        let Some(parsed) = records::parse_status_key(key) else {
            return;
        };
        let value: Option<Value> = value.and_then(|v| serde_json::from_slice(v).ok());
        let mut view = self.view.lock().expect("view lock");
        match (parsed, value) {
            (StatusKey::Task(connector, task), Some(v)) => {
                let state = v["state"]
                    .as_str()
                    .and_then(records::parse_state)
                    .unwrap_or(State::Unassigned);
                let status = TaskStatus {
                    state,
                    trace: v["trace"].as_str().map(str::to_string),
                };
                let worker = v["worker_id"].as_str().unwrap_or_default().to_string();
                view.statuses
                    .insert((connector.to_string(), task), (status, worker));
            }
            (StatusKey::Task(connector, task), None) => {
                view.statuses.remove(&(connector.to_string(), task));
            }
            (StatusKey::Topic { topic, connector }, Some(_)) => {
                view.topics
                    .entry(connector.to_string())
                    .or_default()
                    .insert(topic.to_string());
            }
            (StatusKey::Topic { topic, connector }, None) => {
                if let Some(topics) = view.topics.get_mut(connector) {
                    topics.remove(topic);
                }
                // Reset (or deleted) on some worker: this worker's tasks
                // record the topic again when they next use it.
                self.active_topics.forget(connector, topic);
            }
            (StatusKey::Worker(worker), claim) => {
                let slots: Vec<u32> = claim
                    .and_then(|v| {
                        v["slots"].as_array().map(|a| {
                            a.iter()
                                .filter_map(|s| s.as_u64().map(|s| s as u32))
                                .collect()
                        })
                    })
                    .unwrap_or_default();
                view.claim(worker, slots);
            }
        }
    }

    /// Evens out the tasks when workers join or leave: the holder of slot 0
    /// (a leader Kafka's coordinator chose) moves tasks from the busiest
    /// workers to the idlest by writing new placements to the config topic,
    /// once slot holders have settled. Slots themselves stay where the
    /// coordinator put them.
    async fn balance_tasks(self: Arc<Self>, worker: Arc<Worker>) {
        while !self.stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let waiting = {
                let mut deferred = self.deferred.lock().expect("deferred lock");
                deferred.retain(|(connector, task), _| self.owns_task(connector, *task));
                !deferred.is_empty()
            };
            if waiting {
                worker.reconcile().await;
            }
            let snapshot = {
                let mut view = self.view.lock().expect("view lock");
                let settled = view.unsettled_since.is_some_and(|t| t.elapsed() >= SETTLE);
                if !view.owned.contains(&0) || !settled {
                    continue;
                }
                view.unsettled_since = None;
                (view.placements.clone(), view.slot_owners.clone())
            };
            let (placements, slot_owners) = snapshot;
            let mut running = BTreeMap::new();
            for (name, slots) in &placements {
                let Some((_, _, tasks)) = worker.spec(name).await else {
                    continue;
                };
                if worker.is_stopped(name).await == Some(true) {
                    continue;
                }
                running.insert(
                    name.clone(),
                    slots
                        .iter()
                        .copied()
                        .take(tasks.len())
                        .collect::<Vec<u32>>(),
                );
            }
            for (name, mut slots) in records::rebalance(&running, &slot_owners) {
                let Some((spec, _, _)) = worker.spec(&name).await else {
                    continue;
                };
                // Slots of tasks beyond the running ones stay as they were.
                if let Some(all) = placements.get(&name) {
                    slots.extend(all.iter().skip(slots.len()));
                }
                tracing::info!(connector = %name, slots = ?slots, "moving tasks to even out the workers");
                let value = json!({"properties": spec.config, "slots": slots});
                if let Err(e) = self
                    .write(&records::connector_key(&name), Some(value))
                    .await
                {
                    tracing::warn!(connector = %name, error = %e, "could not move tasks");
                }
            }
        }
    }

    /// Publishes the status of this worker's tasks whenever it changes.
    async fn publish_statuses(self: Arc<Self>, worker: Arc<Worker>) {
        let mut published: HashMap<(String, u32), (State, Option<String>)> = HashMap::new();
        let mut published_topics: BTreeSet<(String, String)> = BTreeSet::new();
        while !self.stop.load(Ordering::Relaxed) {
            self.publish_topics(&mut published_topics).await;
            let local = worker.local_task_statuses().await;
            let running: BTreeSet<(String, u32)> =
                local.iter().map(|(c, t, _)| (c.clone(), *t)).collect();
            // A task that left is reported stopped, so its next worker may
            // start it (it may come back: it is published again then); so is
            // one the status topic shows running here that does not, as
            // after this worker was killed and restarted.
            published.retain(|k, _| running.contains(k));
            for (connector, task) in self.stale_statuses(&running) {
                self.report_stopped(&connector, task).await;
            }
            for (connector, task, status) in local {
                let now = (status.state, status.trace.clone());
                let key = (connector.clone(), task);
                if published.get(&key) == Some(&now) {
                    continue;
                }
                let mut value =
                    json!({"state": status.state.as_str(), "worker_id": self.worker_id});
                if let Some(trace) = &status.trace {
                    value["trace"] = Value::String(trace.clone());
                }
                if self
                    .publish_status(&records::task_status_key(&connector, task), value)
                    .await
                {
                    published.insert(key, now);
                }
            }
            tokio::time::sleep(STATUS_INTERVAL).await;
        }
    }

    /// Publishes the topics this worker's tasks used that the status topic
    /// does not hold yet, as Kafka Connect records a topic on a task's
    /// first record of it.
    async fn publish_topics(&self, published: &mut BTreeSet<(String, String)>) {
        let used: BTreeSet<(String, String)> = self.active_topics.all().into_iter().collect();
        // A topic forgotten (reset) is published again once used again.
        published.retain(|k| used.contains(k));
        for (connector, topic) in used {
            if published.contains(&(connector.clone(), topic.clone())) {
                continue;
            }
            let known = self
                .view
                .lock()
                .expect("view lock")
                .topics
                .get(&connector)
                .is_some_and(|t| t.contains(&topic));
            let value = json!({"topic": {
                "name": topic,
                "connector": connector,
                "discoverTimestamp": std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
            }});
            if known
                || self
                    .publish_status(&records::topic_status_key(&topic, &connector), value)
                    .await
            {
                published.insert((connector, topic));
            }
        }
    }

    /// The topics a connector's tasks have used, on every worker
    /// (`GET /connectors/{name}/topics`); `None` if the cluster has no such
    /// connector. Asked of the cluster's view, not of this worker's running
    /// connectors: one restarting for a config update is briefly not there.
    pub fn topics(&self, name: &str) -> Option<Vec<String>> {
        let mut topics: BTreeSet<String> = {
            let view = self.view.lock().expect("view lock");
            if !view.placements.contains_key(name) {
                return None;
            }
            view.topics.get(name).cloned().unwrap_or_default()
        };
        // This worker's newest, before the status topic has them.
        topics.extend(self.active_topics.list(name));
        Some(topics.into_iter().collect())
    }

    /// `PUT /connectors/{name}/topics/reset` in a cluster: the topic records
    /// are deleted from the status topic, and every worker forgets them as
    /// it reads the tombstones. `false` if the connector is unknown.
    pub async fn reset_topics(&self, name: &str) -> bool {
        if self.topics(name).is_none() {
            return false;
        }
        self.forget_topics(name).await;
        self.active_topics.clear(name);
        true
    }

    async fn forget_topics(&self, name: &str) {
        for topic in self.topics(name).unwrap_or_default() {
            self.publish_tombstone(&records::topic_status_key(&topic, name))
                .await;
        }
    }

    /// Tasks the status topic shows active on this worker that it does not
    /// run.
    fn stale_statuses(&self, running: &BTreeSet<(String, u32)>) -> Vec<(String, u32)> {
        let view = self.view.lock().expect("view lock");
        view.statuses
            .iter()
            .filter(|(key, (status, worker))| {
                *worker == self.worker_id
                    && status.state != State::Unassigned
                    && !running.contains(*key)
            })
            .map(|(key, _)| key.clone())
            .collect()
    }

    async fn report_stopped(&self, connector: &str, task: u32) {
        let value = json!({"state": State::Unassigned.as_str(), "worker_id": self.worker_id});
        self.publish_status(&records::task_status_key(connector, task), value)
            .await;
    }

    /// On shutdown, once the worker has stopped `tasks`: they are reported
    /// stopped, so other workers need not wait to take them over.
    pub async fn report_all_stopped(&self, tasks: Vec<(String, u32)>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut stopped: BTreeSet<(String, u32)> = tasks.into_iter().collect();
        stopped.extend(self.stale_statuses(&BTreeSet::new()));
        for (connector, task) in stopped {
            self.report_stopped(&connector, task).await;
        }
    }

    async fn publish_status(&self, key: &str, value: Value) -> bool {
        let payload = value.to_string();
        let record = FutureRecord::to(&self.topics.status)
            .partition(0)
            .key(key)
            .payload(&payload);
        match self.producer.send(record, Duration::from_secs(30)).await {
            Ok(_) => true,
            Err((e, _)) => {
                tracing::warn!(key, error = %e, "could not publish a status to the status topic");
                false
            }
        }
    }

    /// Whether this worker runs the task: its slot is one of this worker's.
    fn owns_task(&self, connector: &str, task: u32) -> bool {
        let view = self.view.lock().expect("view lock");
        let slot = view
            .placements
            .get(connector)
            .and_then(|p| p.get(task as usize).copied())
            .unwrap_or_else(|| records::fallback_slot(connector, task, self.slot_count));
        view.owned.contains(&slot)
    }

    /// Whether this worker may start a task it was just given: not while
    /// another worker that is still in the cluster shows it running (a task
    /// moved to another slot stops there first), and at most
    /// `handover_timeout` after it was first held back.
    fn may_start(&self, connector: &str, task: u32) -> bool {
        let key = (connector.to_string(), task);
        let busy_elsewhere = {
            let view = self.view.lock().expect("view lock");
            view.statuses.get(&key).is_some_and(|(status, worker)| {
                *worker != self.worker_id
                    && matches!(
                        status.state,
                        State::Running | State::Paused | State::Restarting
                    )
                    && view.slot_owners.values().any(|w| w == worker)
            })
        };
        let mut deferred = self.deferred.lock().expect("deferred lock");
        if !busy_elsewhere {
            deferred.remove(&key);
            return true;
        }
        let since = *deferred
            .entry(key.clone())
            .or_insert_with(std::time::Instant::now);
        if since.elapsed() < self.handover_timeout {
            return false;
        }
        tracing::warn!(
            connector,
            task,
            "the task's previous worker never reported it stopped; starting it anyway"
        );
        deferred.remove(&key);
        true
    }

    /// A task another worker runs, as the status topic last showed it, and
    /// that worker; UNASSIGNED while no worker has reported it.
    fn remote_task_status(&self, connector: &str, task: u32) -> (TaskStatus, Option<String>) {
        let view = self.view.lock().expect("view lock");
        match view.statuses.get(&(connector.to_string(), task)) {
            Some((status, worker)) if *worker != self.worker_id => {
                (status.clone(), Some(worker.clone()))
            }
            _ => (
                TaskStatus {
                    state: State::Unassigned,
                    trace: None,
                },
                None,
            ),
        }
    }

    /// Writes a record to the config topic; returns its offset.
    async fn write(&self, key: &str, value: Option<Value>) -> Result<i64, WorkerError> {
        let payload = value.map(|v| v.to_string());
        let mut record: FutureRecord<'_, str, str> =
            FutureRecord::to(&self.topics.config).partition(0).key(key);
        if let Some(p) = &payload {
            record = record.payload(p);
        }
        self.producer
            .send(record, Duration::from_secs(30))
            .await
            .map(|d| d.offset)
            .map_err(|(e, _)| {
                cluster_error(
                    &format!("writing to the config topic `{}`", self.topics.config),
                    e,
                )
            })
    }

    /// Waits until this worker has applied the config record at `offset`;
    /// what applying it did.
    async fn applied(&self, offset: i64) -> Result<Option<Updated>, WorkerError> {
        let mut applied = self.applied.subscribe();
        tokio::time::timeout(APPLY_TIMEOUT, applied.wait_for(|next| *next > offset))
            .await
            .map_err(|_| {
                cluster_error(
                    "the change is in the config topic",
                    format!("this worker has not applied it within {APPLY_TIMEOUT:?}"),
                )
            })?
            .map_err(|e| cluster_error("the config topic reader stopped", e))?;
        let outcome = self
            .outcomes
            .lock()
            .expect("outcomes lock")
            .get(&offset)
            .cloned()
            .unwrap_or(Ok(None));
        // The message names the connector.
        outcome.map_err(WorkerError::Cluster)
    }

    /// Writes the connector's config with its task placement.
    async fn write_connector(&self, spec: &ConnectorSpec, tasks: u32) -> Result<i64, WorkerError> {
        let slots = {
            let view = self.view.lock().expect("view lock");
            let others = view
                .placements
                .iter()
                .filter(|(name, _)| **name != spec.name)
                .flat_map(|(_, slots)| slots.iter().copied());
            let keep = view.placements.get(&spec.name).cloned().unwrap_or_default();
            records::place(tasks, self.slot_count, &view.slot_owners, others, &keep)
        };
        self.write(
            &records::connector_key(&spec.name),
            Some(json!({"properties": spec.config, "slots": slots})),
        )
        .await
    }

    /// `POST /connectors` in a cluster: validated here, then written to the
    /// config topic for every worker to apply.
    pub async fn create(
        &self,
        worker: &Worker,
        spec: &ConnectorSpec,
        target: TargetState,
    ) -> Result<(), WorkerError> {
        if worker.spec(&spec.name).await.is_some() {
            return Err(WorkerError::AlreadyExists(spec.name.clone()));
        }
        let validated = worker.validated(spec).await?;
        // The target state first, so every worker creates it in that state.
        let state = self
            .write(
                &records::target_state_key(&spec.name),
                Some(json!({"state": target.as_str()})),
            )
            .await?;
        self.applied(state).await?;
        let offset = self
            .write_connector(spec, validated.common.tasks_max)
            .await?;
        self.applied(offset).await.map(|_| ())
    }

    /// `PUT /connectors/{name}/config` in a cluster.
    pub async fn put(&self, worker: &Worker, spec: &ConnectorSpec) -> Result<Updated, WorkerError> {
        let Some((current, _, _)) = worker.spec(&spec.name).await else {
            self.create(worker, spec, TargetState::Running).await?;
            return Ok(Updated::Created);
        };
        if current.config == spec.config {
            return Ok(Updated::Unchanged);
        }
        let validated = worker.validated(spec).await?;
        let offset = self
            .write_connector(spec, validated.common.tasks_max)
            .await?;
        Ok(self.applied(offset).await?.unwrap_or(Updated::Restarted))
    }

    /// `DELETE /connectors/{name}` in a cluster. `false` if unknown.
    pub async fn delete(&self, worker: &Worker, name: &str) -> Result<bool, WorkerError> {
        // A connector in the config topic that this worker could not start
        // (a topic it could not create, say) can be deleted too.
        let tasks: Vec<u32> = match worker.spec(name).await {
            Some((_, _, tasks)) => tasks.into_iter().map(|(id, _)| id).collect(),
            None => match self.view.lock().expect("view lock").placements.get(name) {
                Some(slots) => (0..slots.len() as u32).collect(),
                None => return Ok(false),
            },
        };
        // Kafka Connect forgets a deleted connector's topics too: one made
        // again under the name starts with none.
        self.forget_topics(name).await;
        let offset = self.write(&records::connector_key(name), None).await?;
        self.write(&records::target_state_key(name), None).await?;
        self.applied(offset).await?;
        for id in tasks {
            self.publish_tombstone(&records::task_status_key(name, id))
                .await;
        }
        Ok(true)
    }

    async fn publish_tombstone(&self, key: &str) {
        let record: FutureRecord<'_, str, str> =
            FutureRecord::to(&self.topics.status).partition(0).key(key);
        if let Err((e, _)) = self.producer.send(record, Duration::from_secs(30)).await {
            tracing::warn!(key, error = %e, "could not delete a status from the status topic");
        }
    }

    /// Pause, resume or stop in a cluster. `false` if unknown.
    pub async fn set_target(
        &self,
        worker: &Worker,
        name: &str,
        target: TargetState,
    ) -> Result<bool, WorkerError> {
        let Some(stopped) = worker.is_stopped(name).await else {
            return Ok(false);
        };
        if stopped && target == TargetState::Paused {
            return Err(WorkerError::Conflict(format!(
                "Connector {name} is STOPPED; resume it first"
            )));
        }
        let offset = self
            .write(
                &records::target_state_key(name),
                Some(json!({"state": target.as_str()})),
            )
            .await?;
        self.applied(offset).await?;
        Ok(true)
    }

    /// A restart in a cluster: every worker restarts the connector's tasks
    /// it runs (`task`: only that one). `false` if unknown.
    pub async fn restart(
        &self,
        worker: &Worker,
        name: &str,
        include_tasks: bool,
        only_failed: bool,
        task: Option<u32>,
    ) -> Result<bool, WorkerError> {
        let Some(stopped) = worker.is_stopped(name).await else {
            return Ok(false);
        };
        if stopped {
            return Err(WorkerError::Conflict(format!(
                "Connector {name} is STOPPED; resume it to start its tasks"
            )));
        }
        let mut value = json!({"include-tasks": include_tasks, "only-failed": only_failed});
        if let Some(t) = task {
            value["task"] = json!(t);
        }
        let offset = self.write(&records::restart_key(name), Some(value)).await?;
        self.applied(offset).await?;
        Ok(true)
    }
}

impl TaskPlacement for Cluster {
    fn runs_task(&self, connector: &str, task: u32) -> bool {
        self.owns_task(connector, task)
    }

    fn may_start(&self, connector: &str, task: u32) -> bool {
        Cluster::may_start(self, connector, task)
    }

    fn remote_task_status(&self, connector: &str, task: u32) -> (TaskStatus, Option<String>) {
        Cluster::remote_task_status(self, connector, task)
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("worker_id", &self.worker_id)
            .field("slots_topic", &self.topics.slots)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::View;

    fn owners(view: &View) -> Vec<(u32, &str)> {
        view.slot_owners
            .iter()
            .map(|(s, w)| (*s, w.as_str()))
            .collect()
    }

    #[test]
    fn the_latest_claim_of_a_slot_wins() {
        let mut view = View::default();
        view.claim("a", vec![0, 1, 2]);
        view.claim("b", vec![3]);
        // a dies; after the session timeout its slots go to b and c.
        view.claim("b", vec![1, 3]);
        view.claim("c", vec![0, 2]);
        assert_eq!(owners(&view), [(0, "c"), (1, "b"), (2, "c"), (3, "b")]);
        // A worker giving a slot up does not take back what others hold.
        view.claim("b", vec![3]);
        assert_eq!(owners(&view), [(0, "c"), (2, "c"), (3, "b")]);
        // a comes back and is handed slot 1: its stale claim is gone.
        view.claim("a", vec![1]);
        assert_eq!(owners(&view), [(0, "c"), (1, "a"), (2, "c"), (3, "b")]);
    }
}
