//! Connector plugins, transformations and predicates; plugin config definitions and validation.

use super::*;

#[derive(serde::Deserialize)]
pub(super) struct PluginsQuery {
    #[serde(default = "yes", rename = "connectorsOnly")]
    connectors_only: bool,
}

pub(super) fn yes() -> bool {
    true
}

/// Connectors; with `connectorsOnly=false` also the transformations (WASM
/// and, when the worker has the library, the standard ones) and predicates.
pub(super) async fn list_plugins(
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

pub(super) async fn plugin_config(
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
pub(super) async fn validate_plugin_config(
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
