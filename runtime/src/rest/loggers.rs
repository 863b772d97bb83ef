//! Log levels changed at run time (Kafka Connect's `/admin/loggers`).

use super::*;

pub(super) fn logger_json(level: &str, last_modified: Option<i64>) -> Value {
    json!({"level": level, "last_modified": last_modified})
}

pub(super) async fn list_loggers() -> Json<Value> {
    let out: serde_json::Map<String, Value> = crate::logging::loggers()
        .into_iter()
        .map(|(name, (level, modified))| (name, logger_json(&level, modified)))
        .collect();
    Json(Value::Object(out))
}

pub(super) async fn get_logger(Path(logger): Path<String>) -> Result<Json<Value>, ApiError> {
    let (level, modified) = crate::logging::level_of(&logger)
        .ok_or_else(|| ApiError::not_found("logging is not initialised"))?;
    Ok(Json(logger_json(&level, modified)))
}

pub(super) async fn put_logger(
    Path(logger): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body.map_err(body_error)?;
    let level = body.get("level").and_then(Value::as_str).ok_or_else(|| {
        ApiError::bad_request("the body must be {\"level\": \"DEBUG\"} (or another level)")
    })?;
    let changed = crate::logging::set_level(&logger, level).map_err(ApiError::bad_request)?;
    Ok(Json(json!(changed)))
}
