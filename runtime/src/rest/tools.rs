//! What operators look at beside a connector's config and status: its
//! dead letters, and its transform chain tried on sample records.

use super::*;

/// The connector's dead-letter queue topic, or 404 / 400 (none configured).
pub(super) async fn dlq_topic(herder: &Herder, name: &str) -> Result<String, ApiError> {
    let (spec, _, _) = herder.spec(name).await.ok_or_else(|| unknown(name))?;
    spec.config
        .get("errors.deadletterqueue.topic.name")
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "connector {name} has no dead-letter queue (errors.deadletterqueue.topic.name)"
            ))
        })
}

#[derive(serde::Deserialize)]
pub(super) struct DlqQuery {
    /// Sample records per error class and stage.
    #[serde(default = "default_samples")]
    samples: usize,
}

fn default_samples() -> usize {
    3
}

/// At most this many samples per group may be asked for.
const MAX_SAMPLES: usize = 50;

/// `GET /connectors/{name}/dlq`: the dead letters counted by error class
/// and stage (and each alone, and by origin topic), with sample records
/// whose headers are decoded; what `sluice dlq inspect` shows. A DLQ topic
/// that does not exist yet (no dead letter so far) is an empty report.
pub(super) async fn inspect_dlq(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    query: Result<Query<DlqQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad_request(e.body_text()))?;
    if q.samples > MAX_SAMPLES {
        return Err(ApiError::bad_request(format!(
            "samples: at most {MAX_SAMPLES}, got {}",
            q.samples
        )));
    }
    let topic = dlq_topic(&herder, &name).await?;
    let clients = herder.clients().clone();
    let samples = q.samples;
    let t = topic.clone();
    let report = tokio::task::spawn_blocking(move || crate::dlq::inspect(&clients, &t, samples))
        .await
        .map_err(|e| ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: e.to_string(),
        })?;
    let report = match report {
        Ok(r) => r,
        Err(e) if e.downcast_ref::<crate::dlq::MissingTopic>().is_some() => {
            crate::dlq::InspectReport {
                topic,
                ..Default::default()
            }
        }
        Err(e) => {
            return Err(ApiError {
                status: StatusCode::BAD_GATEWAY,
                message: format!("{e:#}"),
            });
        }
    };
    Ok(Json(serde_json::to_value(report).expect("serialises")))
}

/// At most this many sample records per trial.
const MAX_TRIAL_RECORDS: usize = 100;

/// `POST /connectors/{name}/transforms/test` with `{"records": [...]}`
/// (each record as a line of `sluice transform test`'s input): runs the
/// connector's transform chain (its predicates included) on fresh
/// instances, as a task would, and answers one result per record as
/// `sluice transform test` prints them, with the alias of the transform
/// that failed. Nothing is produced or written, and the running tasks are
/// not touched.
pub(super) async fn test_transforms(
    State(herder): State<Arc<Herder>>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(body_error)?;
    let (spec, _, _) = herder.spec(&name).await.ok_or_else(|| unknown(&name))?;
    let items = body
        .as_object()
        .and_then(|o| o.get("records"))
        .and_then(Value::as_array)
        .ok_or_else(|| {
            ApiError::bad_request(
                "request body: expected {\"records\": [...]}, each record {key, value, headers, topic, partition, offset, timestamp}",
            )
        })?;
    if items.len() > MAX_TRIAL_RECORDS {
        return Err(ApiError::bad_request(format!(
            "request body: at most {MAX_TRIAL_RECORDS} records, got {}",
            items.len()
        )));
    }
    let records = items
        .iter()
        .enumerate()
        .map(|(i, v)| {
            crate::transform::sample::record_from_json(v)
                .map_err(|e| ApiError::bad_request(format!("records[{i}]: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let validated =
        herder.validator().validate(&spec).await.map_err(|e| {
            ApiError::bad_request(format!("Connector configuration is invalid: {e}"))
        })?;
    let chain = validated.chain;
    let aliases: Vec<String> = validated
        .common
        .transforms
        .iter()
        .map(|t| t.alias.clone())
        .collect();
    let connector = name.clone();
    let secrets = crate::config::Secrets::of(&spec.config);
    let results = tokio::task::spawn_blocking(move || {
        // Metrics of their own: a trial is not the connector's traffic.
        let metrics = crate::metrics::Metrics::new();
        chain
            .instantiate(&metrics, &connector, 0)
            .map(|mut c| c.apply(records))
    })
    .await
    .map_err(|e| ApiError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: e.to_string(),
    })?
    .map_err(|e| {
        ApiError::bad_request(format!(
            "configuring the transforms: {}",
            secrets.hide(&e.full_message())
        ))
    })?;
    let results: Vec<Value> = results
        .into_iter()
        .enumerate()
        .map(|(i, r)| match r {
            Ok(records) => crate::transform::sample::outcome_json(i + 1, &Ok(records)),
            Err(f) => {
                let mut v = crate::transform::sample::outcome_json(i + 1, &Err(f.error));
                v["message"] = Value::String(secrets.hide(v["message"].as_str().unwrap_or("")));
                v["transform"] = Value::String(f.transform);
                v
            }
        })
        .collect();
    Ok(Json(json!({"transforms": aliases, "results": results})))
}
