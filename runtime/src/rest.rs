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
use crate::herder::{Herder, RestartOutcome};
use crate::task::TaskStatus;
use crate::validate::ReportError;
use crate::worker::{ConnectorStatus, TargetState, Updated, WorkerError};

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
fn handlers(path: &str) -> MethodRouter<Arc<Herder>> {
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

pub fn router(herder: Arc<Herder>) -> Router {
    PATHS
        .iter()
        .fold(Router::new(), |r, path| r.route(path, handlers(path)))
        .fallback(not_found)
        .with_state(herder)
}

/// Only `/metrics`, for a separate `metrics.listener`.
pub fn metrics_router(herder: Arc<Herder>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .with_state(herder)
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

async fn root(State(herder): State<Arc<Herder>>) -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": option_env!("SLUICE_GIT_COMMIT").unwrap_or("unknown"),
        "kafka_cluster_id": Value::Null,
        "worker_id": herder.worker_id(),
    }))
}

/// Kafka Connect's health check: 503 until the worker has restored and
/// started its connectors.
async fn health(State(herder): State<Arc<Herder>>) -> Response {
    if herder.is_starting() {
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

async fn metrics(State(herder): State<Arc<Herder>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        herder.metrics().render(),
    )
        .into_response()
}

async fn list_connectors(
    State(herder): State<Arc<Herder>>,
    Query(q): Query<Vec<(String, String)>>,
) -> Response {
    let expand: Vec<String> = q
        .into_iter()
        .filter(|(k, _)| k == "expand")
        .map(|(_, v)| v)
        .collect();
    let names = herder.names().await;
    if expand.is_empty() {
        return Json(names).into_response();
    }
    let mut out = serde_json::Map::new();
    for name in names {
        let mut entry = serde_json::Map::new();
        if expand.iter().any(|e| e == "status")
            && let Some(s) = herder.status(&name).await
        {
            entry.insert("status".into(), status_json(&herder, &s));
        }
        if expand.iter().any(|e| e == "info")
            && let Some(info) = info_json(&herder, &name).await
        {
            entry.insert("info".into(), info);
        }
        out.insert(name, Value::Object(entry));
    }
    Json(Value::Object(out)).into_response()
}

async fn info_json(herder: &Herder, name: &str) -> Option<Value> {
    let (spec, kind, tasks) = herder.spec(name).await?;
    Some(json!({
        "name": spec.name,
        "config": crate::config::redact(&spec.config),
        "tasks": tasks.iter().map(|(id, _)| json!({"connector": spec.name, "task": id})).collect::<Vec<_>>(),
        "type": kind.as_str(),
    }))
}

async fn get_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    info_json(&herder, &name)
        .await
        .map(Json)
        .ok_or_else(|| unknown(&name))
}

async fn get_config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<ConfigMap>, ApiError> {
    let (spec, _, _) = herder.spec(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(crate::config::redact(&spec.config)))
}

/// Maps a body that cannot be read to Kafka Connect's error shape: 400 bad
/// JSON, 413 too large, 415 not JSON.
fn body_error(e: JsonRejection) -> ApiError {
    ApiError {
        status: e.status(),
        message: format!("request body: {}", e.body_text()),
    }
}

fn report_error(e: ReportError) -> ApiError {
    match e {
        ReportError::UnknownClass(m) => ApiError::not_found(m),
        ReportError::BadRequest(m) => ApiError::bad_request(m),
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
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let topics = herder.topics(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(json!({ name: {"topics": topics} })))
}

async fn reset_topics(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    match herder.reset_topics(&name).await {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(unknown(&name)),
    }
}

/// `PATCH /connectors/{name}/offsets` with `{offsets: [{partition, offset}]}`.
async fn patch_offsets(
    State(herder): State<Arc<Herder>>,
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
    match herder
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
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match herder
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

/// PAUSED (202), RUNNING (202) or STOPPED (204); 404 if unknown.
async fn set_target(
    herder: &Herder,
    name: &str,
    target: TargetState,
    done: StatusCode,
) -> Result<StatusCode, ApiError> {
    match herder
        .set_target(name, target)
        .await
        .map_err(worker_error)?
    {
        true => Ok(done),
        false => Err(unknown(name)),
    }
}

async fn pause_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_target(&herder, &name, TargetState::Paused, StatusCode::ACCEPTED).await
}

async fn resume_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_target(&herder, &name, TargetState::Running, StatusCode::ACCEPTED).await
}

async fn stop_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_target(&herder, &name, TargetState::Stopped, StatusCode::NO_CONTENT).await
}

/// `POST /connectors` with `{name, config, initial_state?}`: 201, or 409
/// if it exists.
async fn create_connector(
    State(herder): State<Arc<Herder>>,
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
    if herder.spec(&spec.name).await.is_some() {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            message: format!("Connector {} already exists", spec.name),
        });
    }
    herder.create(&spec, target).await.map_err(worker_error)?;
    let info = info_json(&herder, &spec.name)
        .await
        .ok_or_else(|| unknown(&spec.name))?;
    Ok((StatusCode::CREATED, Json(info)).into_response())
}

async fn delete_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let deleted = herder.delete(&name).await.map_err(worker_error)?;
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(unknown(&name))
    }
}

/// `PATCH /connectors/{name}/config`: merges the body into the config; a
/// `null` value removes the key.
async fn patch_config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(patch) = body.map_err(body_error)?;
    let patch = patch
        .as_object()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object of config keys"))?;
    let (spec, _, _) = herder.spec(&name).await.ok_or_else(|| unknown(&name))?;
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
    herder.put(&spec).await.map_err(worker_error)?;
    let info = info_json(&herder, &name)
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
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    query: Result<Query<RestartQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    match herder
        .restart(&name, q.include_tasks, q.only_failed)
        .await
        .map_err(worker_error)?
    {
        RestartOutcome::Unknown => Err(unknown(&name)),
        RestartOutcome::Restarted => Ok(StatusCode::NO_CONTENT.into_response()),
        RestartOutcome::Accepted(status) => {
            Ok((StatusCode::ACCEPTED, Json(status_json(&herder, &status))).into_response())
        }
    }
}

async fn restart_task(
    State(herder): State<Arc<Herder>>,
    Path((name, task)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let id: u32 = task
        .parse()
        .map_err(|_| ApiError::not_found(format!("Task {name}-{task} not found")))?;
    if herder.spec(&name).await.is_none() {
        return Err(unknown(&name));
    }
    match herder.restart_task(&name, id).await.map_err(worker_error)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(ApiError::not_found(format!("Task {name}-{id} not found"))),
    }
}

/// Creates (201) or updates (200) a connector. An invalid config changes
/// nothing and is a 400 naming the key; a transforms-only change is swapped
/// into the running tasks at their next batch boundary.
async fn put_config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(config) =
        body.map_err(|e| ApiError::bad_request(format!("request body: {}", e.body_text())))?;
    let spec = ConnectorSpec::from_json(&json!({"name": name, "config": config}))
        .map_err(|e| ApiError::bad_request(format!("Connector configuration is invalid: {e}")))?;
    let outcome = herder.put(&spec).await.map_err(worker_error)?;
    let info = info_json(&herder, &name)
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
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Json<Value>, ApiError> {
    let (spec, _, _) = herder.spec(&name).await.ok_or_else(|| unknown(&name))?;
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
    let clients = herder.clients().clone();
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
fn task_json(herder: &Herder, status: &ConnectorStatus, id: u32, s: &TaskStatus) -> Value {
    let worker_id = status
        .task_workers
        .get(&id)
        .map_or(herder.worker_id(), String::as_str);
    let mut v = json!({"id": id, "state": s.state, "worker_id": worker_id});
    if let Some(trace) = &s.trace {
        v["trace"] = Value::String(trace.clone());
    }
    v
}

fn status_json(herder: &Herder, s: &ConnectorStatus) -> Value {
    let mut connector = json!({"state": s.connector.state, "worker_id": herder.worker_id()});
    if let Some(trace) = &s.connector.trace {
        connector["trace"] = Value::String(trace.clone());
    }
    json!({
        "name": s.name,
        "connector": connector,
        "tasks": s.tasks.iter().map(|(id, t)| task_json(herder, s, *id, t)).collect::<Vec<_>>(),
        "type": s.kind.as_str(),
    })
}

async fn get_status(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let s = herder.status(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(status_json(&herder, &s)))
}

async fn get_tasks(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (spec, _, tasks) = herder.spec(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(Value::Array(
        tasks
            .iter()
            .map(|(id, config)| json!({"id": {"connector": spec.name, "task": id}, "config": crate::config::redact(config)}))
            .collect(),
    )))
}

async fn get_task_status(
    State(herder): State<Arc<Herder>>,
    Path((name, task)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let s = herder.status(&name).await.ok_or_else(|| unknown(&name))?;
    let id: u32 = task
        .parse()
        .map_err(|_| ApiError::not_found(format!("Task {name}-{task} not found")))?;
    let (_, t) = s
        .tasks
        .iter()
        .find(|(i, _)| *i == id)
        .ok_or_else(|| ApiError::not_found(format!("Task {name}-{id} not found")))?;
    Ok(Json(task_json(&herder, &s, id, t)))
}

async fn get_offsets(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let offsets = herder
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
    State(herder): State<Arc<Herder>>,
    query: Result<Query<PluginsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let version = env!("CARGO_PKG_VERSION");
    let mut out: Vec<Value> = herder
        .validator()
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
        if herder.validator().has_transforms_library() {
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

async fn plugin_config(
    State(herder): State<Arc<Herder>>,
    Path(class): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let plugin = herder
        .validator()
        .find_plugin(&class)
        .map_err(report_error)?;
    Ok(Json(Value::Array(crate::validate::definitions(&plugin))))
}

/// `PUT /connector-plugins/{class}/config/validate`: see
/// [`crate::validate::Validator::report`].
async fn validate_plugin_config(
    State(herder): State<Arc<Herder>>,
    Path(class): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(body_error)?;
    herder
        .validator()
        .report(&class, &body)
        .await
        .map(Json)
        .map_err(report_error)
}
