//! Tasks: started from a validated connector, supervised (a failure or a
//! panic leaves them FAILED with a trace), and placed (in a cluster, only
//! those this worker holds run here).

use super::*;

impl Worker {
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

    pub(super) fn spawn_task(
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
            task_metrics: task::TaskMetrics::new(
                &self.metrics,
                &name,
                id,
                v.common.delivery_guarantee == crate::config::DeliveryGuarantee::ExactlyOnce
                    && !matches!(v.plugin, Plugin::Sink(_)),
            ),
            cancel: cancel.clone(),
            chain: std::sync::Mutex::new(None),
            chain_updates: shared.chain,
            paused: shared.paused,
            status: status.clone(),
            active_topics: shared.topics,
            leave_group: leave_group.clone(),
            envelopes: task::Envelopes::new(&v.common, &self.schema_registry),
            new_topic_partitions: v.common.topic_partitions.unwrap_or(self.default_partitions),
            known_topics: v.topics().into_iter().collect(),
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
            join: tokio::spawn(
                supervised(body, status.clone(), crate::config::Secrets::of(&config))
                    .instrument(span),
            ),
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
        key_schemas: env.common.key_schemas.is_some() || env.common.key_registry.is_some(),
        value_schemas: env.common.value_schemas.is_some() || env.common.value_registry.is_some(),
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
            let Some(start) = task::source::start(&env, &offsets, &errors).await? else {
                return Ok(());
            };
            let source = p.create_task(&task_config, context, start.offsets)?;
            task::source::run(env, source, start.producer, offsets, errors).await
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
    secrets: crate::config::Secrets,
) {
    match AssertUnwindSafe(body).catch_unwind().await {
        Ok(Ok(())) => tracing::info!("task stopped"),
        Ok(Err(e)) => {
            // The trace is shown by the API and logged: a secret the
            // error quotes is hidden.
            let trace = secrets.hide(&e.full_message());
            tracing::error!(kind = %e.kind, error = %trace, "task failed");
            status.set(State::Failed, Some(trace));
        }
        Err(panic) => {
            let message = secrets.hide(&sluice_sdk::panic_message(panic.as_ref()));
            tracing::error!(panic = %message, "task panicked");
            status.set(State::Failed, Some(format!("task panicked: {message}")));
        }
    }
}
