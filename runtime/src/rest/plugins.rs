//! Connector plugins, transformations and predicates; plugin config definitions and validation.

use super::*;

#[derive(serde::Deserialize)]
pub(super) struct PluginsQuery {
    #[serde(
        default = "yes",
        rename = "connectorsOnly",
        deserialize_with = "kafka_bool"
    )]
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
            for class in crate::config::standard_transform_classes() {
                out.push(json!({"class": class, "type": "transformation", "version": version}));
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
    let mut definitions = Value::Array(crate::validate::definitions(&plugin));
    kafka_connect_keys(&mut definitions);
    Ok(Json(definitions))
}

/// Kafka Connect writes a config key's `order_in_group` as `order` (its
/// `ConfigKeyInfo` reads one name and writes the other); its clients read
/// `order`.
pub(super) fn kafka_connect_keys(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let Some(order) = o.remove("order_in_group") {
                o.insert("order".into(), order);
            }
            o.values_mut().for_each(kafka_connect_keys);
        }
        Value::Array(a) => a.iter_mut().for_each(kafka_connect_keys),
        _ => {}
    }
}

/// `PUT /connector-plugins/{class}/config/validate`: see
/// [`crate::validate::Validator::report`].
pub(super) async fn validate_plugin_config(
    State(herder): State<Arc<Herder>>,
    Path(class): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(body_error)?;
    // Kafka Connect refuses a config for another plugin than the path's;
    // here any of a plugin's names is the same plugin.
    let registry = herder.validator().registry();
    if let (Some(given), Some(path_plugin)) = (
        body.get("connector.class").and_then(Value::as_str),
        registry.find(&class),
    ) && registry
        .find(given)
        .is_none_or(|p| p.info().class != path_plugin.info().class)
    {
        return Err(ApiError::bad_request(format!(
            "Included connector type {given} does not match request type {class}"
        )));
    }
    let mut report = herder
        .validator()
        .report(&class, &body)
        .await
        .map_err(report_error)?;
    as_kafka_connect_report(&mut report, &class, &body);
    Ok(Json(report))
}

/// A validation report (see [`crate::validate::Validator::report`]) as
/// Kafka Connect writes one: the endpoint's answer, and `sluice validate`'s
/// (which must agree). `class` is the plugin asked for, `config` the config.
pub fn as_kafka_connect_report(report: &mut Value, class: &str, config: &Value) {
    kafka_connect_keys(report);
    as_kafka_connect_reports(report, class, config);
}

/// What Kafka Connect's report has that the validator's lacks: its `name`
/// is the `connector.class` given (or the class of the path), and a config
/// without a `name` has that error (the validator checks the rest under a
/// stand-in name).
fn as_kafka_connect_reports(report: &mut Value, class: &str, body: &Value) {
    let given = body
        .get("connector.class")
        .and_then(Value::as_str)
        .unwrap_or(class);
    report["name"] = json!(given);
    let named = body
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.trim().is_empty());
    if named {
        return;
    }
    let entry = report["configs"].as_array_mut().and_then(|configs| {
        configs
            .iter_mut()
            .find(|c| c["definition"]["name"] == "name")
    });
    let Some(entry) = entry else {
        return;
    };
    entry["value"]["value"] = Value::Null;
    let message = json!("Missing required configuration \"name\" which has no default value.");
    match entry["value"]["errors"].as_array_mut() {
        Some(errors) => errors.push(message),
        None => entry["value"]["errors"] = json!([message]),
    }
    // Kafka Connect counts error messages.
    report["error_count"] = json!(report["error_count"].as_u64().unwrap_or(0) + 1);
}
