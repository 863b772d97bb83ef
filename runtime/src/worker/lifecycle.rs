//! Creating, updating and stopping connectors on this worker: target
//! states, config updates (hot swaps, `tasks.max` changes), and the
//! clean stop of tasks.

use super::*;

impl Worker {
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
        let topics = self.active_topics.of(&name);
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

    /// Stops a deleted connector and forgets what it kept across restarts
    /// (its topics).
    pub async fn delete_connector(&self, name: &str) -> bool {
        let deleted = self.stop_connector(name).await;
        self.active_topics.remove(name);
        deleted
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
    pub(super) async fn stop_tasks(&self, tasks: Vec<(String, TaskRuntime)>, leave: Leave) {
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
