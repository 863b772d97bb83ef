//! KIP-875 offsets: read, changed and reset while STOPPED.

use super::*;

/// `PATCH /connectors/{name}/offsets` with `{offsets: [{partition, offset}]}`.
pub(super) async fn patch_offsets(
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

pub(super) async fn delete_offsets(
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

pub(super) async fn get_offsets(
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
