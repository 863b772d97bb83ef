//! The REST API, with Kafka Connect's paths and JSON shapes.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post, put};
use axum::{Json, Router};
use serde_json::{Value, json};
use sluice_sdk::ConfigMap;

use crate::config::ConnectorSpec;
use crate::task::TaskStatus;
use crate::worker::{ConnectorStatus, TargetState, Updated, Worker, WorkerError};

/// Every path the API serves, in the order the router is built from. The
/// OpenAPI document (`docs/openapi.yaml`) is checked against this list.
pub const PATHS: &[&str] = &[
    "/",
    "/health",
    "/metrics",
    "/connectors",
    "/connectors/{name}",
    "/connectors/{name}/restart",
    "/connectors/{name}/pause",
    "/connectors/{name}/resume",
    "/connectors/{name}/stop",
    "/connectors/{name}/tasks/{task}/restart",
    "/connectors/{name}/config",
    "/connectors/{name}/status",
    "/connectors/{name}/tasks",
    "/connectors/{name}/tasks/{task}/status",
    "/connectors/{name}/offsets",
    "/connectors/{name}/topics",
    "/connectors/{name}/topics/reset",
    "/connectors/{name}/dlq/replay",
    "/connector-plugins",
    "/connector-plugins/{class}/config",
    "/connector-plugins/{class}/config/validate",
    "/admin/loggers",
    "/admin/loggers/{logger}",
];

/// The handlers of one of [`PATHS`].
fn handlers(path: &str) -> MethodRouter<Arc<Worker>> {
    match path {
        "/" => get(root),
        "/health" => get(health),
        "/metrics" => get(metrics),
        "/connectors" => get(list_connectors).post(create_connector),
        "/connectors/{name}" => get(get_connector).delete(delete_connector),
        "/connectors/{name}/restart" => post(restart_connector),
        "/connectors/{name}/pause" => put(pause_connector),
        "/connectors/{name}/resume" => put(resume_connector),
        "/connectors/{name}/stop" => put(stop_connector),
        "/connectors/{name}/tasks/{task}/restart" => post(restart_task),
        "/connectors/{name}/config" => get(get_config).put(put_config).patch(patch_config),
        "/connectors/{name}/status" => get(get_status),
        "/connectors/{name}/tasks" => get(get_tasks),
        "/connectors/{name}/tasks/{task}/status" => get(get_task_status),
        "/connectors/{name}/offsets" => {
            get(get_offsets).patch(patch_offsets).delete(delete_offsets)
        }
        "/connectors/{name}/topics" => get(get_topics),
        "/connectors/{name}/topics/reset" => put(reset_topics),
        "/connectors/{name}/dlq/replay" => post(replay_dlq),
        "/connector-plugins" => get(list_plugins),
        "/connector-plugins/{class}/config" => get(plugin_config),
        "/connector-plugins/{class}/config/validate" => put(validate_plugin_config),
        "/admin/loggers" => get(list_loggers),
        "/admin/loggers/{logger}" => get(get_logger).put(put_logger),
        other => unreachable!("no handlers for {other}"),
    }
}

pub fn router(worker: Arc<Worker>) -> Router {
    PATHS
        .iter()
        .fold(Router::new(), |r, path| r.route(path, handlers(path)))
        .fallback(not_found)
        .with_state(worker)
}

/// Only `/metrics`, for a separate `metrics.listener`.
pub fn metrics_router(worker: Arc<Worker>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(worker)
}

fn logger_json(level: &str, last_modified: Option<i64>) -> Value {
    json!({"level": level, "last_modified": last_modified})
}

async fn list_loggers() -> Json<Value> {
    let out: serde_json::Map<String, Value> = crate::logging::loggers()
        .into_iter()
        .map(|(name, (level, modified))| (name, logger_json(&level, modified)))
        .collect();
    Json(Value::Object(out))
}

async fn get_logger(Path(logger): Path<String>) -> Result<Json<Value>, ApiError> {
    let (level, modified) = crate::logging::level_of(&logger)
        .ok_or_else(|| ApiError::not_found("logging is not initialised"))?;
    Ok(Json(logger_json(&level, modified)))
}

async fn put_logger(
    Path(logger): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) =
        body.map_err(|e| ApiError::bad_request(format!("request body: {}", e.body_text())))?;
    let level = body.get("level").and_then(Value::as_str).ok_or_else(|| {
        ApiError::bad_request("the body must be {\"level\": \"DEBUG\"} (or another level)")
    })?;
    let changed = crate::logging::set_level(&logger, level).map_err(ApiError::bad_request)?;
    Ok(Json(json!(changed)))
}

/// Kafka Connect's error body.
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error_code": self.status.as_u16(), "message": self.message});
        (self.status, Json(body)).into_response()
    }
}

fn unknown(name: &str) -> ApiError {
    ApiError::not_found(format!("Connector {name} not found"))
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint")
}

async fn root(State(worker): State<Arc<Worker>>) -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": option_env!("SLUICE_GIT_COMMIT").unwrap_or("unknown"),
        "kafka_cluster_id": Value::Null,
        "worker_id": worker.id,
    }))
}

/// Kafka Connect's health check: 503 until the worker has restored and
/// started its connectors.
async fn health(State(worker): State<Arc<Worker>>) -> Response {
    if worker.is_starting() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error_code": 503, "message": "Worker is still starting up: restoring and starting its connectors."})),
        )
            .into_response();
    }
    Json(
        json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}),
    )
    .into_response()
}

async fn metrics(State(worker): State<Arc<Worker>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        worker.metrics().render(),
    )
        .into_response()
}

/// Secrets are never shown back.
pub fn redact(config: &ConfigMap) -> ConfigMap {
    config
        .iter()
        .map(|(k, v)| {
            let secret = ["password", "secret", "token", "credentials"]
                .iter()
                .any(|s| k.to_ascii_lowercase().contains(s));
            (
                k.clone(),
                if secret {
                    "[hidden]".to_string()
                } else {
                    v.clone()
                },
            )
        })
        .collect()
}

async fn list_connectors(
    State(worker): State<Arc<Worker>>,
    Query(q): Query<Vec<(String, String)>>,
) -> Response {
    let expand: Vec<String> = q
        .into_iter()
        .filter(|(k, _)| k == "expand")
        .map(|(_, v)| v)
        .collect();
    let names = worker.names().await;
    if expand.is_empty() {
        return Json(names).into_response();
    }
    let mut out = serde_json::Map::new();
    for name in names {
        let mut entry = serde_json::Map::new();
        if expand.iter().any(|e| e == "status")
            && let Some(s) = worker.status(&name).await
        {
            entry.insert("status".into(), status_json(&worker, &s));
        }
        if expand.iter().any(|e| e == "info")
            && let Some(info) = info_json(&worker, &name).await
        {
            entry.insert("info".into(), info);
        }
        out.insert(name, Value::Object(entry));
    }
    Json(Value::Object(out)).into_response()
}

async fn info_json(worker: &Worker, name: &str) -> Option<Value> {
    let (spec, kind, tasks) = worker.spec(name).await?;
    Some(json!({
        "name": spec.name,
        "config": redact(&spec.config),
        "tasks": tasks.iter().map(|(id, _)| json!({"connector": spec.name, "task": id})).collect::<Vec<_>>(),
        "type": kind.as_str(),
    }))
}

async fn get_connector(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    info_json(&worker, &name)
        .await
        .map(Json)
        .ok_or_else(|| unknown(&name))
}

async fn get_config(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<Json<ConfigMap>, ApiError> {
    let (spec, _, _) = worker.spec(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(redact(&spec.config)))
}

/// Maps a body that cannot be read to Kafka Connect's error shape: 400 bad
/// JSON, 413 too large, 415 not JSON.
fn body_error(e: JsonRejection) -> ApiError {
    ApiError {
        status: e.status(),
        message: format!("request body: {}", e.body_text()),
    }
}

fn worker_error(e: WorkerError) -> ApiError {
    match e {
        WorkerError::Invalid { error, .. } => {
            ApiError::bad_request(format!("Connector configuration is invalid: {error}"))
        }
        WorkerError::AlreadyExists(n) => ApiError {
            status: StatusCode::CONFLICT,
            message: format!("Connector {n} already exists"),
        },
        WorkerError::Start { .. } => ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: e.to_string(),
        },
        WorkerError::Conflict(m) => ApiError {
            status: StatusCode::CONFLICT,
            message: m,
        },
        WorkerError::BadRequest(m) => ApiError::bad_request(m),
        WorkerError::Cluster(m) => ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: m,
        },
    }
}

async fn get_topics(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let topics = worker.topics(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(json!({ name: {"topics": topics} })))
}

async fn reset_topics(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    match worker.reset_topics(&name).await {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(unknown(&name)),
    }
}

/// `PATCH /connectors/{name}/offsets` with `{offsets: [{partition, offset}]}`.
async fn patch_offsets(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(body_error)?;
    let entries = body
        .get("offsets")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| {
            ApiError::bad_request(
                "the body must be {\"offsets\": [{\"partition\": {...}, \"offset\": {...}}]}",
            )
        })?;
    match worker
        .alter_offsets(&name, Some(entries))
        .await
        .map_err(worker_error)?
    {
        true => Ok(Json(
            json!({"message": "The offsets for this connector have been altered successfully"}),
        )),
        false => Err(unknown(&name)),
    }
}

async fn delete_offsets(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match worker
        .alter_offsets(&name, None)
        .await
        .map_err(worker_error)?
    {
        true => Ok(Json(
            json!({"message": "The offsets for this connector have been reset successfully"}),
        )),
        false => Err(unknown(&name)),
    }
}

async fn pause_connector(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let changed = match worker.cluster() {
        Some(cluster) => {
            cluster
                .set_target(&worker, &name, TargetState::Paused)
                .await
        }
        None => worker.pause(&name).await,
    };
    match changed.map_err(worker_error)? {
        true => Ok(StatusCode::ACCEPTED),
        false => Err(unknown(&name)),
    }
}

async fn resume_connector(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let changed = match worker.cluster() {
        Some(cluster) => {
            cluster
                .set_target(&worker, &name, TargetState::Running)
                .await
        }
        None => worker.resume(&name).await,
    };
    match changed.map_err(worker_error)? {
        true => Ok(StatusCode::ACCEPTED),
        false => Err(unknown(&name)),
    }
}

async fn stop_connector(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let changed = match worker.cluster() {
        Some(cluster) => {
            cluster
                .set_target(&worker, &name, TargetState::Stopped)
                .await
        }
        None => worker.stop(&name).await,
    };
    match changed.map_err(worker_error)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(unknown(&name)),
    }
}

/// `POST /connectors` with `{name, config, initial_state?}`: 201, or 409
/// if it exists.
async fn create_connector(
    State(worker): State<Arc<Worker>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(mut body) = body.map_err(body_error)?;
    let initial = body
        .as_object_mut()
        .and_then(|o| o.remove("initial_state"))
        .unwrap_or(Value::Null);
    let target = match &initial {
        Value::Null => TargetState::Running,
        Value::String(s) => TargetState::parse(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "initial_state `{s}` is not one of {}",
                TargetState::NAMES
            ))
        })?,
        other => {
            return Err(ApiError::bad_request(format!(
                "initial_state must be one of {} (a string), got {other}",
                TargetState::NAMES
            )));
        }
    };
    let spec = ConnectorSpec::from_json(&body)
        .map_err(|e| ApiError::bad_request(format!("Connector configuration is invalid: {e}")))?;
    if worker.spec(&spec.name).await.is_some() {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            message: format!("Connector {} already exists", spec.name),
        });
    }
    match worker.cluster() {
        Some(cluster) => cluster.create(&worker, &spec, target).await,
        None => worker.create_in(&spec, target).await,
    }
    .map_err(worker_error)?;
    let info = info_json(&worker, &spec.name)
        .await
        .ok_or_else(|| unknown(&spec.name))?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

async fn delete_connector(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let deleted = match worker.cluster() {
        Some(cluster) => cluster.delete(&worker, &name).await.map_err(worker_error)?,
        None => worker.stop_connector(&name).await,
    };
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(unknown(&name))
    }
}

/// `PATCH /connectors/{name}/config`: merges the body into the config; a
/// `null` value removes the key.
async fn patch_config(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(patch) = body.map_err(body_error)?;
    let patch = patch
        .as_object()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object of config keys"))?;
    let (spec, _, _) = worker.spec(&name).await.ok_or_else(|| unknown(&name))?;
    let mut merged = serde_json::Map::new();
    for (k, v) in &spec.config {
        merged.insert(k.clone(), Value::String(v.clone()));
    }
    for (k, v) in patch {
        if v.is_null() {
            merged.remove(k);
        } else {
            merged.insert(k.clone(), v.clone());
        }
    }
    let spec = ConnectorSpec::from_json(&json!({"name": name, "config": merged}))
        .map_err(|e| ApiError::bad_request(format!("Connector configuration is invalid: {e}")))?;
    match worker.cluster() {
        Some(cluster) => cluster.put(&worker, &spec).await,
        None => worker.put(&spec).await,
    }
    .map_err(worker_error)?;
    let info = info_json(&worker, &name)
        .await
        .ok_or_else(|| unknown(&name))?;
    Ok((StatusCode::OK, Json(info)).into_response())
}

#[derive(serde::Deserialize)]
struct RestartQuery {
    #[serde(default, rename = "includeTasks")]
    include_tasks: bool,
    #[serde(default, rename = "onlyFailed")]
    only_failed: bool,
}

/// `POST /connectors/{name}/restart`: without `includeTasks` or
/// `onlyFailed`, the restart is done (the connector showing RESTARTING
/// meanwhile) and answered 204. With them, Kafka Connect's semantics: 202
/// with the status in which what is being restarted shows RESTARTING, the
/// restart then going on in the background until it is RUNNING again.
async fn restart_connector(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
    query: Result<Query<RestartQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if let Some(cluster) = worker.cluster() {
        // Every worker restarts the tasks it runs.
        if !cluster
            .restart(&worker, &name, q.include_tasks, q.only_failed, None)
            .await
            .map_err(worker_error)?
        {
            return Err(unknown(&name));
        }
        if !q.include_tasks && !q.only_failed {
            return Ok(StatusCode::NO_CONTENT.into_response());
        }
        let status = worker.status(&name).await.ok_or_else(|| unknown(&name))?;
        return Ok((StatusCode::ACCEPTED, Json(status_json(&worker, &status))).into_response());
    }
    if !q.include_tasks && !q.only_failed {
        return match worker.restart(&name).await.map_err(worker_error)? {
            true => Ok(StatusCode::NO_CONTENT.into_response()),
            false => Err(unknown(&name)),
        };
    }
    let plan = worker
        .plan_restart(&name, q.include_tasks, q.only_failed)
        .await
        .map_err(worker_error)?
        .ok_or_else(|| unknown(&name))?;
    let status = worker.status(&name).await.ok_or_else(|| unknown(&name))?;
    let body = status_json(&worker, &status);
    let background = worker.clone();
    tokio::spawn(async move {
        background.execute_restart(plan).await;
    });
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

async fn restart_task(
    State(worker): State<Arc<Worker>>,
    Path((name, task)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let id: u32 = task
        .parse()
        .map_err(|_| ApiError::not_found(format!("Task {name}-{task} not found")))?;
    if worker.spec(&name).await.is_none() {
        return Err(unknown(&name));
    }
    let restarted = match worker.cluster() {
        Some(cluster) => {
            let known = worker
                .spec(&name)
                .await
                .is_some_and(|(_, _, tasks)| tasks.iter().any(|(t, _)| *t == id));
            if known {
                cluster
                    .restart(&worker, &name, false, false, Some(id))
                    .await
            } else {
                Ok(false)
            }
        }
        None => worker.restart_task(&name, id).await,
    };
    match restarted.map_err(worker_error)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::not_found(format!("Task {name}-{id} not found"))),
    }
}

/// Creates (201) or updates (200) a connector. An invalid config changes
/// nothing and is a 400 naming the key; a transforms-only change is swapped
/// into the running tasks at their next batch boundary.
async fn put_config(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(config) =
        body.map_err(|e| ApiError::bad_request(format!("request body: {}", e.body_text())))?;
    let spec = ConnectorSpec::from_json(&json!({"name": name, "config": config}))
        .map_err(|e| ApiError::bad_request(format!("Connector configuration is invalid: {e}")))?;
    let outcome = match worker.cluster() {
        Some(cluster) => cluster.put(&worker, &spec).await,
        None => worker.put(&spec).await,
    }
    .map_err(worker_error)?;
    let info = info_json(&worker, &name)
        .await
        .ok_or_else(|| unknown(&name))?;
    let status = if outcome == Updated::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    // What the update did, for operators and scripts (Kafka Connect has no
    // equivalent; the body keeps its shape).
    let what = match outcome {
        Updated::Created => "created",
        Updated::TransformsSwapped => "transforms-swapped",
        Updated::Restarted => "restarted",
        Updated::TasksResized => "tasks-resized",
        Updated::Unchanged => "unchanged",
    };
    Ok((status, [("sluice-config-update", what)], Json(info)).into_response())
}

/// Replays the connector's dead-letter queue (body: `{to, error_class,
/// stage, max, dry_run}`, all optional); answers with the replay's report.
async fn replay_dlq(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Json<Value>, ApiError> {
    let (spec, _, _) = worker.spec(&name).await.ok_or_else(|| unknown(&name))?;
    let topic = spec
        .config
        .get("errors.deadletterqueue.topic.name")
        .filter(|t| !t.trim().is_empty())
        .cloned()
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "connector {name} has no dead-letter queue (errors.deadletterqueue.topic.name)"
            ))
        })?;
    let opts: crate::dlq::ReplayOptions = match body {
        Some(Json(v)) => serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?,
        None => Default::default(),
    };
    let clients = worker.clients().clone();
    let report =
        tokio::task::spawn_blocking(move || crate::dlq::replay(&clients, topic.trim(), &opts))
            .await
            .map_err(|e| ApiError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: e.to_string(),
            })?
            .map_err(|e| ApiError {
                status: StatusCode::BAD_GATEWAY,
                message: format!("{e:#}"),
            })?;
    Ok(Json(serde_json::to_value(report).expect("serialises")))
}

/// A task's status; `worker_id` the worker running it (in a cluster, maybe
/// another one).
fn task_json(worker: &Worker, status: &ConnectorStatus, id: u32, s: &TaskStatus) -> Value {
    let worker_id = status.task_workers.get(&id).unwrap_or(&worker.id);
    let mut v = json!({"id": id, "state": s.state, "worker_id": worker_id});
    if let Some(trace) = &s.trace {
        v["trace"] = Value::String(trace.clone());
    }
    v
}

fn status_json(worker: &Worker, s: &ConnectorStatus) -> Value {
    let mut connector = json!({"state": s.connector.state, "worker_id": worker.id});
    if let Some(trace) = &s.connector.trace {
        connector["trace"] = Value::String(trace.clone());
    }
    json!({
        "name": s.name,
        "connector": connector,
        "tasks": s.tasks.iter().map(|(id, t)| task_json(worker, s, *id, t)).collect::<Vec<_>>(),
        "type": s.kind.as_str(),
    })
}

async fn get_status(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let s = worker.status(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(status_json(&worker, &s)))
}

async fn get_tasks(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (spec, _, tasks) = worker.spec(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(Value::Array(
        tasks
            .iter()
            .map(|(id, config)| json!({"id": {"connector": spec.name, "task": id}, "config": redact(config)}))
            .collect(),
    )))
}

async fn get_task_status(
    State(worker): State<Arc<Worker>>,
    Path((name, task)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let s = worker.status(&name).await.ok_or_else(|| unknown(&name))?;
    let id: u32 = task
        .parse()
        .map_err(|_| ApiError::not_found(format!("Task {name}-{task} not found")))?;
    let (_, t) = s
        .tasks
        .iter()
        .find(|(i, _)| *i == id)
        .ok_or_else(|| ApiError::not_found(format!("Task {name}-{id} not found")))?;
    Ok(Json(task_json(&worker, &s, id, t)))
}

async fn get_offsets(
    State(worker): State<Arc<Worker>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let offsets = worker
        .offsets(&name)
        .await
        .map_err(worker_error)?
        .ok_or_else(|| unknown(&name))?;
    Ok(Json(json!({"offsets": offsets})))
}

#[derive(serde::Deserialize)]
struct PluginsQuery {
    #[serde(default = "yes", rename = "connectorsOnly")]
    connectors_only: bool,
}

fn yes() -> bool {
    true
}

/// Connectors; with `connectorsOnly=false` also the transformations (WASM
/// and, when the worker has the library, the standard ones) and predicates.
async fn list_plugins(
    State(worker): State<Arc<Worker>>,
    query: Result<Query<PluginsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let version = env!("CARGO_PKG_VERSION");
    let mut out: Vec<Value> = worker
        .registry()
        .all()
        .iter()
        .map(|p| {
            let info = p.info();
            json!({"class": info.class, "type": info.kind.as_str(), "version": info.version, "aliases": info.aliases})
        })
        .collect();
    if !q.connectors_only {
        out.push(json!({"class": "wasm", "type": "transformation", "version": version}));
        if worker.has_transforms_library() {
            for t in crate::config::STANDARD_TRANSFORMS {
                let keyed = !matches!(
                    t,
                    "Filter" | "ValueToKey" | "RegexRouter" | "InsertHeader" | "LatencyStamp"
                );
                let variants: Vec<String> = if keyed {
                    vec![format!("{t}$Key"), format!("{t}$Value")]
                } else {
                    vec![t.to_string()]
                };
                for v in variants {
                    let class = if t == "LatencyStamp" {
                        v
                    } else {
                        format!("org.apache.kafka.connect.transforms.{v}")
                    };
                    out.push(json!({"class": class, "type": "transformation", "version": version}));
                }
            }
        }
        for p in ["TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"] {
            out.push(json!({"class": format!("org.apache.kafka.connect.transforms.predicates.{p}"), "type": "predicate", "version": version}));
        }
    }
    Ok(Json(Value::Array(out)))
}

/// Kafka Connect's `ConfigKeyInfo` for every key: the runtime's common keys,
/// then the plugin's own.
fn definitions(plugin: &crate::plugin::Plugin) -> Vec<Value> {
    let mut common = vec![
        (
            "name",
            "STRING",
            true,
            Value::Null,
            "Globally unique name of the connector",
        ),
        (
            "connector.class",
            "STRING",
            true,
            Value::Null,
            "The connector's class: a Sluice name or Kafka Connect's",
        ),
        ("tasks.max", "INT", false, json!("1"), "Most tasks to run"),
        (
            "transforms",
            "LIST",
            false,
            json!(""),
            "Transform aliases, applied in order",
        ),
        ("predicates", "LIST", false, json!(""), "Predicate aliases"),
        (
            "errors.tolerance",
            "STRING",
            false,
            json!("none"),
            "none: a failed record fails the task; all: it is skipped (and dead-lettered)",
        ),
        (
            "errors.deadletterqueue.topic.name",
            "STRING",
            false,
            json!(""),
            "The dead-letter queue",
        ),
        (
            "batch.max.records",
            "INT",
            false,
            json!("500"),
            "Most records per batch",
        ),
    ];
    if plugin.kind() != sluice_sdk::ConnectorType::Source {
        common.push(("topics", "LIST", true, Value::Null, "Topics to consume"));
    }
    let own = match plugin {
        crate::plugin::Plugin::Source(p) => p.config_definition(),
        crate::plugin::Plugin::Sink(p) => p.config_definition(),
        crate::plugin::Plugin::Stream => {
            crate::plugin::stream::StreamConnector::config_definition()
        }
    };
    let mut out = Vec::new();
    for (i, (name, ty, required, default, doc)) in common.into_iter().enumerate() {
        out.push(json!({"name": name, "type": ty, "required": required, "default_value": default, "importance": "HIGH",
            "documentation": doc, "group": "Common", "order_in_group": i + 1, "width": "NONE", "display_name": name, "dependents": []}));
    }
    for (i, d) in own
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let name = d["name"].clone();
        out.push(json!({"name": name, "type": d["type"], "required": d["required"], "default_value": d["default_value"],
            "importance": if d["required"] == true { "HIGH" } else { "MEDIUM" }, "documentation": d["documentation"],
            "group": "Connector", "order_in_group": i + 1, "width": "NONE", "display_name": name, "dependents": []}));
    }
    out
}

fn find_plugin(worker: &Worker, class: &str) -> Result<crate::plugin::Plugin, ApiError> {
    worker.registry().find(class).cloned().ok_or_else(|| {
        ApiError::not_found(format!(
            "Failed to find any class that implements Connector and which name matches {class}"
        ))
    })
}

async fn plugin_config(
    State(worker): State<Arc<Worker>>,
    Path(class): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let plugin = find_plugin(&worker, &class)?;
    Ok(Json(Value::Array(definitions(&plugin))))
}

/// `PUT /connector-plugins/{class}/config/validate`: see [`validate_report`].
async fn validate_plugin_config(
    State(worker): State<Arc<Worker>>,
    Path(class): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(body_error)?;
    validate_report(&worker, &class, &body).await.map(Json)
}

/// Every check a create would make (keys, types, the plugin's own keys,
/// WASM modules loaded and checked against the interface), answered in Kafka
/// Connect's `ConfigInfos` shape: one entry per key, the first problem found
/// attached to its key. The REST endpoint and `sluice validate` (offline)
/// both answer with this.
pub async fn validate_report(
    worker: &Worker,
    class: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let plugin = find_plugin(worker, class)?;
    let mut config = crate::config::string_map_from_json(body)
        .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?;
    config
        .entry("connector.class".into())
        .or_insert_with(|| class.to_string());
    let name = config
        .get("name")
        .cloned()
        .unwrap_or_else(|| "validate".into());
    let spec = ConnectorSpec::from_json(&json!({"name": name, "config": config}))
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let problem = worker.validate(&spec).await.err();
    let (error_key, error_text) = match &problem {
        Some(e) => (
            e.key.clone().unwrap_or_else(|| "connector.class".into()),
            Some(e.message.clone()),
        ),
        None => (String::new(), None),
    };
    let mut configs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for d in definitions(&plugin) {
        let key = d["name"].as_str().unwrap_or_default().to_string();
        let errors: Vec<String> = if key == error_key {
            error_text.clone().into_iter().collect()
        } else {
            Vec::new()
        };
        let value = redact(&spec.config)
            .get(&key)
            .cloned()
            .map(Value::String)
            .unwrap_or(Value::Null);
        configs.push(json!({"definition": d, "value": {"name": key, "value": value, "recommended_values": [], "errors": errors, "visible": true}}));
        seen.insert(key);
    }
    for (key, value) in redact(&spec.config) {
        if seen.contains(&key) {
            continue;
        }
        let errors: Vec<String> = if key == error_key {
            error_text.clone().into_iter().collect()
        } else {
            Vec::new()
        };
        configs.push(json!({"definition": {"name": key, "type": "STRING", "required": false, "default_value": null, "importance": "LOW",
            "documentation": "", "group": "Other", "order_in_group": 0, "width": "NONE", "display_name": key, "dependents": []},
            "value": {"name": key, "value": value, "recommended_values": [], "errors": errors, "visible": true}}));
        seen.insert(key);
    }
    if let Some(text) = &error_text
        && !seen.contains(&error_key)
    {
        configs.push(json!({"definition": {"name": error_key, "type": "STRING", "required": true, "default_value": null, "importance": "HIGH",
            "documentation": "", "group": "Other", "order_in_group": 0, "width": "NONE", "display_name": error_key, "dependents": []},
            "value": {"name": error_key, "value": null, "recommended_values": [], "errors": [text], "visible": true}}));
    }
    Ok(json!({
        "name": plugin.info().class,
        "error_count": usize::from(problem.is_some()),
        "groups": ["Common", "Connector"],
        "configs": configs,
    }))
}
