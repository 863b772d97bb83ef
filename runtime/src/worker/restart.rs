//! Restarts in place, as Kafka Connect plans them: what restarts shows
//! RESTARTING until it runs again; the other tasks go on.

use super::*;

impl Worker {
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
}
