//! The built-in schema registry's REST API, under `/schema-registry`: the
//! part of Confluent's Schema Registry API that serializers and operators
//! use, with its status and error codes (`{"error_code": 40401, ...}`).
//! Behind the same authentication as the rest of the listener.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::herder::Herder;
use crate::schema::registry::builtin::{BuiltinRegistry, DeleteRefused};
use crate::schema::registry::{Compatibility, RegistryError, SchemaType};

/// Where the registry is served on the REST listener.
pub const PREFIX: &str = "/schema-registry";

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// Confluent's error body and codes.
struct Error(StatusCode, u32, String);

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let body = json!({"error_code": self.1, "message": self.2});
        (
            self.0,
            [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
            body.to_string(),
        )
            .into_response()
    }
}

fn ok(v: Value) -> Response {
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
        v.to_string(),
    )
        .into_response()
}

/// A schema's text as the body, unwrapped.
fn raw(schema: String) -> Response {
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
        schema,
    )
        .into_response()
}

fn schema_not_found(id: impl std::fmt::Display) -> Error {
    Error(
        StatusCode::NOT_FOUND,
        40403,
        format!("Schema {id} not found"),
    )
}

fn subject_not_found(subject: &str) -> Error {
    Error(
        StatusCode::NOT_FOUND,
        40401,
        format!("Subject '{subject}' not found."),
    )
}

impl From<RegistryError> for Error {
    fn from(e: RegistryError) -> Self {
        match e {
            RegistryError::Unavailable(m) => Error(StatusCode::INTERNAL_SERVER_ERROR, 50002, m),
            RegistryError::Incompatible(m) => Error(StatusCode::CONFLICT, 409, m),
            RegistryError::NotFound(m) => Error(StatusCode::NOT_FOUND, 40403, m),
            RegistryError::Refused(m) => Error(StatusCode::UNPROCESSABLE_ENTITY, 42201, m),
        }
    }
}

type Registry = Arc<BuiltinRegistry>;

pub fn router(herder: Arc<Herder>) -> Router {
    let registry: Registry = herder.worker().schema_registry().clone();
    Router::new()
        .route("/", get(|| async { ok(json!({})) }))
        .route("/subjects", get(subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(versions).post(register))
        .route(
            "/subjects/{subject}/versions/{version}",
            get(version).delete(delete_version),
        )
        .route(
            "/subjects/{subject}/versions/{version}/schema",
            get(version_schema),
        )
        .route("/schemas/ids/{id}", get(schema_by_id))
        .route("/schemas/ids/{id}/schema", get(raw_schema_by_id))
        .route("/schemas/ids/{id}/versions", get(id_versions))
        .route(
            "/schemas/types",
            get(|| async { ok(json!(SchemaType::ALL.map(SchemaType::name))) }),
        )
        .route("/config", get(global_config).put(put_global_config))
        .route(
            "/config/{subject}",
            get(subject_config)
                .put(put_subject_config)
                .delete(delete_subject_config),
        )
        .route(
            "/compatibility/subjects/{subject}/versions/{version}",
            post(compatibility),
        )
        .fallback(|| async {
            Error(
                StatusCode::NOT_FOUND,
                404,
                "no such endpoint of the schema registry".into(),
            )
        })
        .with_state(registry)
}

/// A body's `schema` and its `schemaType` (AVRO if absent).
fn schema_of(body: &Bytes) -> Result<(SchemaType, String), Error> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        Error(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            format!("the body is not JSON: {e}"),
        )
    })?;
    let schema_type = match v.get("schemaType") {
        None | Some(Value::Null) => SchemaType::Avro,
        Some(t) => t.as_str().and_then(SchemaType::parse).ok_or_else(|| {
            Error(
                StatusCode::UNPROCESSABLE_ENTITY,
                42201,
                format!(
                    "schemaType {t} is not supported by Sluice's built-in registry; it holds AVRO, JSON and PROTOBUF"
                ),
            )
        })?,
    };
    if v.get("references")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
    {
        return Err(Error(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            "schema references are not supported by Sluice's built-in registry".into(),
        ));
    }
    let schema = v.get("schema").and_then(Value::as_str).ok_or_else(|| {
        Error(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            "the body has no `schema` string".into(),
        )
    })?;
    schema_type.validate(schema).map_err(|e| {
        Error(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            format!("Invalid schema: {e}"),
        )
    })?;
    Ok((schema_type, schema.to_string()))
}

fn version_number(version: &str) -> Result<Option<u32>, Error> {
    match version {
        "latest" | "-1" => Ok(None),
        v => v.parse::<u32>().ok().filter(|v| *v >= 1).map(Some).ok_or_else(|| {
            Error(
                StatusCode::UNPROCESSABLE_ENTITY,
                42202,
                format!("The specified version '{v}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""),
            )
        }),
    }
}

fn id_number(id: &str) -> Result<u32, Error> {
    id.parse::<u32>().map_err(|_| schema_not_found(id))
}

/// `?deleted=true`: soft-deleted subjects and versions are listed too;
/// `deletedOnly` (or the Python client's `deleted_only`): only those;
/// `subjectPrefix`: subjects that start with it.
#[derive(serde::Deserialize, Default)]
struct DeletedQuery {
    #[serde(default)]
    deleted: bool,
    #[serde(default, rename = "deletedOnly", alias = "deleted_only")]
    deleted_only: bool,
    #[serde(default, rename = "subjectPrefix")]
    subject_prefix: Option<String>,
}

/// `?permanent=true`: a hard delete of what was soft-deleted.
#[derive(serde::Deserialize, Default)]
struct PermanentQuery {
    #[serde(default)]
    permanent: bool,
}

async fn subjects(
    State(r): State<Registry>,
    Query(q): Query<DeletedQuery>,
) -> Result<Response, Error> {
    let (all, live) = r.read(|s| (s.subjects(true), s.subjects(false))).await?;
    let listed: Vec<String> = all
        .into_iter()
        .filter(|s| q.subject_prefix.as_deref().is_none_or(|p| s.starts_with(p)))
        .filter(|s| match (q.deleted_only, q.deleted) {
            (true, _) => !live.contains(s),
            (false, true) => true,
            (false, false) => live.contains(s),
        })
        .collect();
    Ok(ok(json!(listed)))
}

async fn versions(
    State(r): State<Registry>,
    Path(subject): Path<String>,
    Query(q): Query<DeletedQuery>,
) -> Result<Response, Error> {
    let v = r
        .read(|s| {
            let all = s.versions(&subject, true)?;
            let live = s.versions(&subject, false).unwrap_or_default();
            Some(match (q.deleted_only, q.deleted) {
                (true, _) => all.into_iter().filter(|v| !live.contains(v)).collect(),
                (false, true) => all,
                // Every version soft-deleted: the subject is not found.
                (false, false) if live.is_empty() => return None,
                (false, false) => live,
            })
        })
        .await?
        .ok_or_else(|| subject_not_found(&subject))?;
    Ok(ok(json!(v)))
}

async fn found_version(
    r: &Registry,
    subject: &str,
    version: &str,
    deleted: bool,
) -> Result<crate::schema::registry::Registered, Error> {
    let number = version_number(version)?;
    let (exists, found) = r
        .read(|s| {
            (
                s.versions(subject, deleted).is_some(),
                s.version_of(subject, number, deleted),
            )
        })
        .await?;
    match (exists, found) {
        (_, Some(f)) => Ok(f),
        (false, None) => Err(subject_not_found(subject)),
        (true, None) => Err(Error(
            StatusCode::NOT_FOUND,
            40402,
            format!("Version {version} not found."),
        )),
    }
}

async fn version(
    State(r): State<Registry>,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Query<DeletedQuery>,
) -> Result<Response, Error> {
    let f = found_version(&r, &subject, &version, q.deleted).await?;
    Ok(ok(f.to_json()))
}

async fn version_schema(
    State(r): State<Registry>,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Query<DeletedQuery>,
) -> Result<Response, Error> {
    let f = found_version(&r, &subject, &version, q.deleted).await?;
    Ok(raw(f.schema))
}

async fn register(
    State(r): State<Registry>,
    Path(subject): Path<String>,
    body: Bytes,
) -> Result<Response, Error> {
    let (schema_type, schema) = schema_of(&body)?;
    let id = r.register_checked(&subject, schema_type, &schema).await?;
    Ok(ok(json!({"id": id})))
}

async fn lookup(
    State(r): State<Registry>,
    Path(subject): Path<String>,
    body: Bytes,
) -> Result<Response, Error> {
    let (schema_type, schema) = schema_of(&body)?;
    let (exists, found) = r
        .read(|s| {
            (
                s.versions(&subject, false).is_some(),
                s.find(&subject, schema_type, &schema),
            )
        })
        .await?;
    match (exists, found) {
        (_, Some(f)) => Ok(ok(f.to_json())),
        (false, None) => Err(subject_not_found(&subject)),
        (true, None) => Err(Error(
            StatusCode::NOT_FOUND,
            40403,
            "Schema not found".into(),
        )),
    }
}

async fn delete_subject(
    State(r): State<Registry>,
    Path(subject): Path<String>,
    Query(q): Query<PermanentQuery>,
) -> Result<Response, Error> {
    let deleted = r
        .delete(&subject, None, q.permanent)
        .await?
        .map_err(|why| delete_refused(why, &subject, None))?;
    Ok(ok(json!(deleted)))
}

async fn delete_version(
    State(r): State<Registry>,
    Path((subject, version)): Path<(String, String)>,
    Query(q): Query<PermanentQuery>,
) -> Result<Response, Error> {
    let number = match version_number(&version)? {
        Some(n) => n,
        // `latest`: the latest version not deleted.
        None => {
            r.read(|s| s.version(&subject, None))
                .await?
                .ok_or_else(|| subject_not_found(&subject))?
                .version
        }
    };
    let deleted = r
        .delete(&subject, Some(number), q.permanent)
        .await?
        .map_err(|why| delete_refused(why, &subject, Some(number)))?;
    Ok(ok(json!(deleted.first().copied().unwrap_or(number))))
}

/// Confluent's answers to a deletion it refuses.
fn delete_refused(why: DeleteRefused, subject: &str, version: Option<u32>) -> Error {
    match (why, version) {
        (DeleteRefused::SubjectNotFound, _) => subject_not_found(subject),
        (DeleteRefused::VersionNotFound, v) => Error(
            StatusCode::NOT_FOUND,
            40402,
            format!("Version {} not found.", v.unwrap_or_default()),
        ),
        (DeleteRefused::AlreadySoftDeleted, None) => Error(
            StatusCode::NOT_FOUND,
            40404,
            format!(
                "Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            ),
        ),
        (DeleteRefused::AlreadySoftDeleted, Some(v)) => Error(
            StatusCode::NOT_FOUND,
            40406,
            format!(
                "Subject '{subject}' Version {v} was soft deleted.Set permanent=true to delete permanently"
            ),
        ),
        (DeleteRefused::NotSoftDeletedFirst, None) => Error(
            StatusCode::NOT_FOUND,
            40405,
            format!("Subject '{subject}' was not deleted first before being permanently deleted"),
        ),
        (DeleteRefused::NotSoftDeletedFirst, Some(v)) => Error(
            StatusCode::NOT_FOUND,
            40407,
            format!(
                "Subject '{subject}' Version {v} was not deleted first before being permanently deleted"
            ),
        ),
    }
}

/// `?format=` of a schema by id: `serialized` gives a Protobuf schema as
/// the base64 of its `FileDescriptorProto` (what Confluent's Python
/// deserializer asks for); other formats give the schema as registered.
#[derive(serde::Deserialize, Default)]
struct FormatQuery {
    format: Option<String>,
}

async fn schema_by_id(
    State(r): State<Registry>,
    Path(id): Path<String>,
    Query(q): Query<FormatQuery>,
) -> Result<Response, Error> {
    let id = id_number(&id)?;
    let (schema_type, mut schema) = r
        .read(|s| s.schema(id))
        .await?
        .ok_or_else(|| schema_not_found(id))?;
    if schema_type == SchemaType::Protobuf && q.format.as_deref() == Some("serialized") {
        schema = crate::schema::protobuf::compile::serialized(&schema).map_err(|e| {
            Error(
                StatusCode::INTERNAL_SERVER_ERROR,
                50001,
                format!("schema {id} does not compile: {e}"),
            )
        })?;
    }
    let mut answer = json!({"schema": schema});
    if schema_type != SchemaType::Avro {
        answer["schemaType"] = schema_type.name().into();
    }
    Ok(ok(answer))
}

async fn raw_schema_by_id(
    State(r): State<Registry>,
    Path(id): Path<String>,
) -> Result<Response, Error> {
    let id = id_number(&id)?;
    let (_, schema) = r
        .read(|s| s.schema(id))
        .await?
        .ok_or_else(|| schema_not_found(id))?;
    Ok(raw(schema))
}

async fn id_versions(State(r): State<Registry>, Path(id): Path<String>) -> Result<Response, Error> {
    let id = id_number(&id)?;
    let uses = r.read(|s| s.schema(id).map(|_| s.uses(id))).await?;
    let uses = uses.ok_or_else(|| schema_not_found(id))?;
    Ok(ok(json!(
        uses.into_iter()
            .map(|(subject, version)| json!({"subject": subject, "version": version}))
            .collect::<Vec<_>>()
    )))
}

fn level_of(body: &Bytes) -> Result<Compatibility, Error> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        Error(
            StatusCode::UNPROCESSABLE_ENTITY,
            42203,
            format!("the body is not JSON: {e}"),
        )
    })?;
    let name = v
        .get("compatibility")
        .or_else(|| v.get("compatibilityLevel"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    Compatibility::parse(name).ok_or_else(|| {
        Error(
            StatusCode::UNPROCESSABLE_ENTITY,
            42203,
            format!("Invalid compatibility level `{name}`: one of BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE"),
        )
    })
}

async fn global_config(State(r): State<Registry>) -> Result<Response, Error> {
    let level = r.read(|s| s.level(None)).await?.unwrap_or_default();
    Ok(ok(json!({"compatibilityLevel": level.name()})))
}

async fn put_global_config(State(r): State<Registry>, body: Bytes) -> Result<Response, Error> {
    let level = level_of(&body)?;
    r.set_level(None, Some(level)).await?;
    Ok(ok(json!({"compatibility": level.name()})))
}

#[derive(serde::Deserialize)]
struct ConfigQuery {
    #[serde(rename = "defaultToGlobal", default)]
    default_to_global: bool,
}

async fn subject_config(
    State(r): State<Registry>,
    Path(subject): Path<String>,
    Query(q): Query<ConfigQuery>,
) -> Result<Response, Error> {
    let (own, global) = r
        .read(|s| (s.level(Some(&subject)), s.level(None).unwrap_or_default()))
        .await?;
    match (own, q.default_to_global) {
        (Some(l), _) => Ok(ok(json!({"compatibilityLevel": l.name()}))),
        (None, true) => Ok(ok(json!({"compatibilityLevel": global.name()}))),
        (None, false) => Err(Error(
            StatusCode::NOT_FOUND,
            40408,
            format!("Subject '{subject}' does not have subject-level compatibility configured"),
        )),
    }
}

async fn put_subject_config(
    State(r): State<Registry>,
    Path(subject): Path<String>,
    body: Bytes,
) -> Result<Response, Error> {
    let level = level_of(&body)?;
    r.set_level(Some(&subject), Some(level)).await?;
    Ok(ok(json!({"compatibility": level.name()})))
}

async fn delete_subject_config(
    State(r): State<Registry>,
    Path(subject): Path<String>,
) -> Result<Response, Error> {
    let own = r.read(|s| s.level(Some(&subject))).await?;
    let Some(level) = own else {
        return Err(subject_not_found(&subject));
    };
    r.set_level(Some(&subject), None).await?;
    Ok(ok(json!({"compatibilityLevel": level.name()})))
}

async fn compatibility(
    State(r): State<Registry>,
    Path((subject, version)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, Error> {
    let (schema_type, schema) = schema_of(&body)?;
    let number = version_number(&version)?;
    let result = r
        .read(|s| {
            let against = s.version(&subject, number)?;
            let level = s
                .level(Some(&subject))
                .unwrap_or(s.level(None).unwrap_or_default());
            // One version is named: checked against it alone.
            let level = match level {
                Compatibility::BackwardTransitive => Compatibility::Backward,
                Compatibility::ForwardTransitive => Compatibility::Forward,
                Compatibility::FullTransitive => Compatibility::Full,
                l => l,
            };
            Some(level.check(
                schema_type,
                &schema,
                &[(against.schema_type, against.schema.as_str())],
            ))
        })
        .await?;
    match result {
        None => Err(found_version(&r, &subject, &version, false)
            .await
            .err()
            .unwrap_or_else(|| subject_not_found(&subject))),
        Some(Ok(())) => Ok(ok(json!({"is_compatible": true}))),
        Some(Err(m)) => Ok(ok(json!({"is_compatible": false, "messages": [m]}))),
    }
}
