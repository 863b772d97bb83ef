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

mod connectors;
mod loggers;
mod offsets;
mod plugins;
pub mod registry;
mod tools;
mod ui;

use connectors::*;
use loggers::*;
use offsets::*;
use plugins::*;
use tools::*;

pub use plugins::as_kafka_connect_report;

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
    "/connectors/{name}/dlq",
    "/connectors/{name}/dlq/replay",
    "/connectors/{name}/transforms/test",
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
        "/connectors/{name}/dlq" => get(inspect_dlq),
        "/connectors/{name}/dlq/replay" => post(replay_dlq),
        "/connectors/{name}/transforms/test" => post(test_transforms),
        "/connector-plugins" => get(list_plugins),
        "/connector-plugins/{class}/config" => get(plugin_config),
        "/connector-plugins/{class}/config/validate" => put(validate_plugin_config),
        "/admin/loggers" => get(list_loggers),
        "/admin/loggers/{logger}" => get(get_logger).put(put_logger),
        other => unreachable!("no handlers for {other}"),
    }
}

/// The API's [`PATHS`], the web console's files at `/ui` and the built-in
/// schema registry at `/schema-registry` (neither part of Kafka Connect's
/// API nor of its OpenAPI document).
pub fn router(herder: Arc<Herder>) -> Router {
    PATHS
        .iter()
        .fold(Router::new(), |r, path| r.route(path, handlers(path)))
        .route("/ui", get(ui::ui_index))
        .route("/ui/", get(ui::ui_index))
        .route("/ui/{*path}", get(ui::ui_asset))
        .nest_service(registry::PREFIX, registry::router(herder.clone()))
        .method_not_allowed_fallback(method_not_allowed)
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

/// A boolean query parameter as Kafka Connect reads one: `true` or `false`
/// in any case (Python's `requests` sends `True`/`False`); anything else is
/// a 400 here (Kafka Connect takes it as false).
fn kafka_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    if s.eq_ignore_ascii_case("true") {
        Ok(true)
    } else if s.eq_ignore_ascii_case("false") {
        Ok(false)
    } else {
        Err(serde::de::Error::custom(format!(
            "expected true or false, got `{s}`"
        )))
    }
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

/// A method a path does not serve: 405 in Kafka Connect's error shape (the
/// `Allow` header lists the ones it serves).
async fn method_not_allowed() -> ApiError {
    ApiError {
        status: StatusCode::METHOD_NOT_ALLOWED,
        message: "HTTP 405 Method Not Allowed".into(),
    }
}

async fn root(State(herder): State<Arc<Herder>>) -> Json<Value> {
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": option_env!("SLUICE_GIT_COMMIT").unwrap_or("unknown"),
        "kafka_cluster_id": kafka_cluster_id(&herder).await,
        "worker_id": herder.worker_id(),
    }))
}

/// The id of the Kafka cluster the worker uses, as Kafka Connect shows it
/// at `/`: asked of the brokers once (per bootstrap servers), or null while
/// they cannot be reached.
async fn kafka_cluster_id(herder: &Herder) -> Option<String> {
    static IDS: std::sync::Mutex<std::collections::BTreeMap<String, String>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let bootstrap = herder.clients().bootstrap_servers().to_string();
    if let Some(id) = IDS.lock().expect("cluster ids lock").get(&bootstrap) {
        return Some(id.clone());
    }
    let clients = herder.clients().clone();
    let id = tokio::task::spawn_blocking(move || {
        use rdkafka::consumer::Consumer;
        let consumer = clients.tool_consumer("sluice-cluster-id").ok()?;
        consumer
            .client()
            .fetch_cluster_id(std::time::Duration::from_secs(2))
    })
    .await
    .ok()??;
    IDS.lock()
        .expect("cluster ids lock")
        .insert(bootstrap, id.clone());
    Some(id)
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
