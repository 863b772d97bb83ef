//! A client of an external schema registry in Confluent's REST API
//! (`schema.registry.url`, several tried in turn; basic auth; a trust
//! store; a client certificate for registries that ask for one).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Registered, Registry, RegistryError, SchemaType};

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// How to reach a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    pub urls: Vec<String>,
    /// `basic.auth.user.info` (`user:password`) with
    /// `basic.auth.credentials.source=USER_INFO`.
    pub basic_auth: Option<(String, String)>,
    /// `schema.registry.ssl.truststore.*`.
    pub truststore: Option<super::stores::Store>,
    /// `schema.registry.ssl.keystore.*`.
    pub keystore: Option<super::stores::Store>,
}

pub struct HttpRegistry {
    http: reqwest::Client,
    config: ClientConfig,
}

impl HttpRegistry {
    pub fn new(config: ClientConfig) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10));
        if let Some(store) = &config.truststore {
            let pem = store
                .trusted_pem()
                .map_err(|e| format!("the trust store: {e}"))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                format!(
                    "the trust store `{}` is not certificates: {e}",
                    store.location
                )
            })? {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(store) = &config.keystore {
            let pem = store
                .identity_pem()
                .map_err(|e| format!("the keystore: {e}"))?;
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
                format!(
                    "the keystore `{}` is not a certificate chain with its private key: {e}",
                    store.location
                )
            })?;
            builder = builder.identity(identity);
        }
        let http = builder
            .build()
            .map_err(|e| format!("cannot build the registry's HTTP client: {e}"))?;
        Ok(HttpRegistry { http, config })
    }

    /// One request, to each URL in turn until one answers; `Ok(None)` for
    /// a 404.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Option<Value>, RegistryError> {
        let mut last = String::new();
        for base in &self.config.urls {
            let url = format!("{}{path}", base.trim_end_matches('/'));
            let mut request = self
                .http
                .request(method.clone(), &url)
                .header(reqwest::header::ACCEPT, CONTENT_TYPE);
            if let Some((user, password)) = &self.config.basic_auth {
                request = request.basic_auth(user, Some(password));
            }
            if let Some(body) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
                    .body(body.to_string());
            }
            let response = match request.send().await {
                Ok(r) => r,
                Err(e) => {
                    last = format!("{url}: {e}");
                    continue;
                }
            };
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            if status.is_server_error() {
                last = format!("{url} answered {status}: {text}");
                continue;
            }
            let parsed: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
            if status.is_success() {
                return Ok(Some(parsed));
            }
            let message = parsed["message"].as_str().unwrap_or(&text).to_string();
            let code = parsed["error_code"].as_u64().unwrap_or(0);
            return match status.as_u16() {
                404 if code == 40401 || code == 40403 || code == 404 || code == 0 => Ok(None),
                404 => Ok(None),
                409 => Err(RegistryError::Incompatible(format!(
                    "the schema registry at {base} refused the schema: {message}"
                ))),
                401 | 403 => Err(RegistryError::Unavailable(format!(
                    "the schema registry at {base} answered {status}: {message} (check basic.auth.user.info)"
                ))),
                _ => Err(RegistryError::Refused(format!(
                    "the schema registry at {base} answered {status}: {message}"
                ))),
            };
        }
        Err(RegistryError::Unavailable(last))
    }
}

fn registered(v: &Value) -> Option<Registered> {
    Some(Registered {
        subject: v["subject"].as_str()?.to_string(),
        version: u32::try_from(v["version"].as_u64()?).ok()?,
        id: u32::try_from(v["id"].as_u64()?).ok()?,
        schema_type: schema_type_of(v)?,
        schema: v["schema"].as_str()?.to_string(),
    })
}

/// An answer's `schemaType` (absent: AVRO); `None` for a type Sluice
/// does not read.
fn schema_type_of(v: &Value) -> Option<SchemaType> {
    v["schemaType"]
        .as_str()
        .map_or(Some(SchemaType::Avro), SchemaType::parse)
}

/// A registration or lookup body: `schemaType` only when not AVRO, as
/// Confluent's serializers send it.
fn schema_body(schema_type: SchemaType, schema: &str) -> Value {
    let mut body = json!({"schema": schema});
    if schema_type != SchemaType::Avro {
        body["schemaType"] = schema_type.name().into();
    }
    body
}

fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[async_trait]
impl Registry for HttpRegistry {
    async fn schema_by_id(&self, id: u32) -> Result<(SchemaType, String), RegistryError> {
        let v = self
            .call(reqwest::Method::GET, &format!("/schemas/ids/{id}"), None)
            .await?
            .ok_or_else(|| {
                RegistryError::NotFound(format!("the schema registry has no schema with id {id}"))
            })?;
        let schema_type = schema_type_of(&v).ok_or_else(|| {
            RegistryError::Refused(format!(
                "the schema with id {id} is {}, which Sluice does not read",
                v["schemaType"]
            ))
        })?;
        let schema = v["schema"].as_str().map(str::to_string).ok_or_else(|| {
            RegistryError::Refused(format!(
                "the registry's answer for id {id} has no schema: {v}"
            ))
        })?;
        Ok((schema_type, schema))
    }

    async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<u32, RegistryError> {
        let v = self
            .call(
                reqwest::Method::POST,
                &format!("/subjects/{}/versions", encode(subject)),
                Some(schema_body(schema_type, schema)),
            )
            .await?
            .ok_or_else(|| {
                RegistryError::Refused(format!(
                    "the registry answered 404 registering under `{subject}`"
                ))
            })?;
        v["id"]
            .as_u64()
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| RegistryError::Refused(format!("the registry's answer has no id: {v}")))
    }

    async fn lookup(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<Option<Registered>, RegistryError> {
        Ok(self
            .call(
                reqwest::Method::POST,
                &format!("/subjects/{}", encode(subject)),
                Some(schema_body(schema_type, schema)),
            )
            .await?
            .as_ref()
            .and_then(registered))
    }

    async fn latest(&self, subject: &str) -> Result<Option<Registered>, RegistryError> {
        Ok(self
            .call(
                reqwest::Method::GET,
                &format!("/subjects/{}/versions/latest", encode(subject)),
                None,
            )
            .await?
            .as_ref()
            .and_then(registered))
    }
}
