//! Connectors: create, read, update, delete, target states, restarts, status, tasks, topics and the dead-letter replay.

use super::*;

pub(super) async fn list_connectors(
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
            entry.insert("status".into(), status_json(&herder, &s).await);
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

pub(super) async fn info_json(herder: &Herder, name: &str) -> Option<Value> {
    let (spec, kind, tasks) = herder.spec(name).await?;
    Some(json!({
        "name": spec.name,
        "config": crate::config::redact(&spec.config),
        "tasks": tasks.iter().map(|(id, _)| json!({"connector": spec.name, "task": id})).collect::<Vec<_>>(),
        "type": kind.as_str(),
    }))
}

pub(super) async fn get_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    info_json(&herder, &name)
        .await
        .map(Json)
        .ok_or_else(|| unknown(&name))
}

pub(super) async fn get_config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<ConfigMap>, ApiError> {
    let (spec, _, _) = herder.spec(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(crate::config::redact(&spec.config)))
}

pub(super) async fn get_topics(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let topics = herder.topics(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(json!({ name: {"topics": topics} })))
}

/// 202 with no body, as Kafka Connect answers.
pub(super) async fn reset_topics(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    match herder.reset_topics(&name).await {
        true => Ok(StatusCode::ACCEPTED),
        false => Err(unknown(&name)),
    }
}

/// PAUSED (202), RUNNING (202) or STOPPED (204); 404 if unknown.
pub(super) async fn set_target(
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

pub(super) async fn pause_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_target(&herder, &name, TargetState::Paused, StatusCode::ACCEPTED).await
}

pub(super) async fn resume_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_target(&herder, &name, TargetState::Running, StatusCode::ACCEPTED).await
}

pub(super) async fn stop_connector(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    set_target(&herder, &name, TargetState::Stopped, StatusCode::NO_CONTENT).await
}

/// `POST /connectors` with `{name, config, initial_state?}`: 201, or 409
/// if it exists.
pub(super) async fn create_connector(
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

pub(super) async fn delete_connector(
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
pub(super) async fn patch_config(
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
pub(super) struct RestartQuery {
    #[serde(default, rename = "includeTasks", deserialize_with = "kafka_bool")]
    include_tasks: bool,
    #[serde(default, rename = "onlyFailed", deserialize_with = "kafka_bool")]
    only_failed: bool,
}

/// `POST /connectors/{name}/restart`: without `includeTasks` or
/// `onlyFailed`, the restart is done (the connector showing RESTARTING
/// meanwhile) and answered 204. With them, Kafka Connect's semantics: 202
/// with the status in which what is being restarted shows RESTARTING, the
/// restart then going on in the background until it is RUNNING again.
pub(super) async fn restart_connector(
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
            let body = status_json(&herder, &status).await;
            Ok((StatusCode::ACCEPTED, Json(body)).into_response())
        }
    }
}

pub(super) async fn restart_task(
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
pub(super) async fn put_config(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(config) = body.map_err(body_error)?;
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
pub(super) async fn replay_dlq(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    body: Result<Option<Json<Value>>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    // No body (no content type) is the default options; one that cannot be
    // read is an error in Kafka Connect's shape, as everywhere else.
    let body = body.map_err(body_error)?;
    let topic = dlq_topic(&herder, &name).await?;
    let opts: crate::dlq::ReplayOptions = match body {
        // An object: serde would also take an array, its items as the
        // fields in order (`[]` a replay of everything, not a dry run).
        Some(Json(v)) if v.is_object() => serde_json::from_value(v)
            .map_err(|e| ApiError::bad_request(format!("request body: {e}")))?,
        Some(Json(v)) => {
            return Err(ApiError::bad_request(format!(
                "request body: the replay options must be a JSON object {{to, error_class, stage, max, dry_run}}, got {v}"
            )));
        }
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
                // What was asked cannot be replayed (400), or Kafka failed
                // the replay (502).
                status: match e.downcast_ref::<crate::dlq::InvalidReplay>() {
                    Some(_) => StatusCode::BAD_REQUEST,
                    None => StatusCode::BAD_GATEWAY,
                },
                message: format!("{e:#}"),
            })?;
    Ok(Json(serde_json::to_value(report).expect("serialises")))
}

/// The version of the plugin a connector runs, which Kafka Connect (4.1
/// on) shows in the connector's and each task's status.
pub(super) async fn plugin_version(herder: &Herder, name: &str) -> Option<&'static str> {
    let (spec, _, _) = herder.spec(name).await?;
    let class = spec.config.get("connector.class")?;
    let plugin = herder.validator().registry().find(class)?;
    Some(plugin.info().version)
}

/// A task's status; `worker_id` the worker running it (in a cluster, maybe
/// another one).
pub(super) fn task_json(
    herder: &Herder,
    status: &ConnectorStatus,
    id: u32,
    s: &TaskStatus,
    version: Option<&str>,
) -> Value {
    let worker_id = status
        .task_workers
        .get(&id)
        .map_or(herder.worker_id(), String::as_str);
    let mut v = json!({"id": id, "state": s.state, "worker_id": worker_id});
    if let Some(version) = version {
        v["version"] = json!(version);
    }
    if let Some(trace) = &s.trace {
        v["trace"] = Value::String(trace.clone());
    }
    v
}

pub(super) async fn status_json(herder: &Herder, s: &ConnectorStatus) -> Value {
    let version = plugin_version(herder, &s.name).await;
    let mut connector = json!({"state": s.connector.state, "worker_id": herder.worker_id()});
    if let Some(version) = version {
        connector["version"] = json!(version);
    }
    if let Some(trace) = &s.connector.trace {
        connector["trace"] = Value::String(trace.clone());
    }
    json!({
        "name": s.name,
        "connector": connector,
        "tasks": s.tasks.iter().map(|(id, t)| task_json(herder, s, *id, t, version)).collect::<Vec<_>>(),
        "type": s.kind.as_str(),
    })
}

pub(super) async fn get_status(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let s = herder.status(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(status_json(&herder, &s).await))
}

pub(super) async fn get_tasks(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (spec, _, tasks) = herder.spec(&name).await.ok_or_else(|| unknown(&name))?;
    Ok(Json(Value::Array(
        tasks
            .iter()
            .map(|(id, config)| {
                let shown = crate::config::redact(&herder.validator().conceal(&spec, config));
                json!({"id": {"connector": spec.name, "task": id}, "config": shown})
            })
            .collect(),
    )))
}

pub(super) async fn get_task_status(
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
    let version = plugin_version(&herder, &name).await;
    Ok(Json(task_json(&herder, &s, id, t, version)))
}
