//! Restarts in place, as Kafka Connect plans them: what restarts shows
//! RESTARTING until it runs again; the other tasks go on.

use std::time::Instant;

use super::*;
use crate::config::RestartPolicy;

/// How often FAILED tasks are looked for, for automatic restarts.
const AUTO_RESTART_TICK: Duration = Duration::from_millis(250);

/// A task running this long since its last automatic restart (or
/// `errors.restart.max.delay.ms`, if longer) starts its count again.
const STREAK_RESET_AFTER: Duration = Duration::from_secs(300);

/// A task's automatic restarts in a row (`errors.restart.policy`).
#[derive(Debug, Default)]
pub(super) struct AutoRestart {
    attempts: u32,
    /// When the next restart is due, once the failure has been seen.
    next_at: Option<Instant>,
    last_restart: Option<Instant>,
    /// `errors.restart.max.attempts` reached: said once in the trace.
    gave_up: bool,
}

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

impl Worker {
    /// Restarts this worker's FAILED tasks of connectors that set
    /// `errors.restart.policy=backoff`, for as long as the worker lives.
    pub fn start_auto_restarts(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let worker = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(AUTO_RESTART_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match worker.upgrade() {
                    Some(w) => w.auto_restart_round().await,
                    None => return,
                }
            }
        });
    }

    /// One look at every local task: a new failure is scheduled for a
    /// restart after the policy's delay (said in its trace), a due one is
    /// restarted, a task that has run for [`STREAK_RESET_AFTER`] starts its
    /// count again.
    async fn auto_restart_round(&self) {
        let now = Instant::now();
        let mut due: Vec<(String, u32, u32)> = Vec::new();
        {
            let connectors = self.connectors.read().await;
            let mut book = self.auto_restarts.lock().expect("auto restarts lock");
            let policies: BTreeMap<&str, RestartPolicy> = connectors
                .iter()
                .filter(|(_, c)| !c.stopped && !c.restarting)
                .filter_map(|(name, c)| Some((name.as_str(), RestartPolicy::of(&c.spec.config)?)))
                .collect();
            book.retain(|(name, id), _| {
                policies.contains_key(name.as_str())
                    && connectors[name].tasks.iter().any(|t| t.id == *id)
            });
            for (name, policy) in &policies {
                for task in &connectors[*name].tasks {
                    let key = (name.to_string(), task.id);
                    let labels = [*name, &task.id.to_string()];
                    let status = task.status.get();
                    match status.state {
                        State::Failed => {
                            let entry = book.entry(key).or_default();
                            match entry.next_at {
                                Some(at) if now >= at => {
                                    entry.next_at = None;
                                    entry.attempts += 1;
                                    entry.last_restart = Some(now);
                                    due.push((name.to_string(), task.id, entry.attempts));
                                }
                                Some(_) => {}
                                None if policy
                                    .max_attempts
                                    .is_some_and(|m| entry.attempts >= m) =>
                                {
                                    if !entry.gave_up {
                                        entry.gave_up = true;
                                        let note = format!(
                                            "\n\nNo more automatic restarts: {} in a row (errors.restart.max.attempts); restart it through the REST API.",
                                            entry.attempts
                                        );
                                        task.status.set(
                                            State::Failed,
                                            Some(status.trace.unwrap_or_default() + &note),
                                        );
                                    }
                                }
                                None => {
                                    let delay = policy.delay(entry.attempts);
                                    entry.next_at = Some(now + delay);
                                    let note = format!(
                                        "\n\nAutomatic restart {} (errors.restart.policy=backoff) in {} ms.",
                                        entry.attempts + 1,
                                        delay.as_millis()
                                    );
                                    task.status.set(
                                        State::Failed,
                                        Some(status.trace.unwrap_or_default() + &note),
                                    );
                                }
                            }
                        }
                        State::Running => {
                            // Running is not yet healthy (a start may still
                            // be retrying): only a long run ends the streak.
                            let healthy_after = policy.max_delay.max(STREAK_RESET_AFTER);
                            let recovered = book.get(&key).is_some_and(|e| {
                                e.last_restart
                                    .is_some_and(|r| now.duration_since(r) >= healthy_after)
                            });
                            if recovered {
                                book.remove(&key);
                                self.metrics
                                    .task_restart_attempts
                                    .with_label_values(&labels)
                                    .set(0);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        for (name, id, attempt) in due {
            let labels = [name.as_str(), &id.to_string()];
            self.metrics
                .task_auto_restarts
                .with_label_values(&labels)
                .inc();
            self.metrics
                .task_restart_attempts
                .with_label_values(&labels)
                .set(i64::from(attempt));
            tracing::info!(connector = %name, task = id, attempt, "restarting a FAILED task (errors.restart.policy=backoff)");
            if let Err(e) = self.restart_task(&name, id).await {
                tracing::warn!(connector = %name, task = id, error = %e, "automatic restart failed");
            }
        }
    }
}
