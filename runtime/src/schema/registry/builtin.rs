//! The worker's own schema registry, used when a converter names no
//! `schema.registry.url`, and served in Confluent's REST API under
//! `/schema-registry` (`crate::rest::registry`).
//!
//! Schemas live in a compacted Kafka topic (`_sluice_schemas`, one
//! partition), so they survive restarts and every worker of a cluster
//! reads the same ones. The topic is a log every worker replays in the
//! same order, so all of them derive the same ids and versions without a
//! leader:
//!
//! - a registration is a record with a key of its own (never compacted
//!   away) whose value is `{"subject", "schema"}` and, for a schema that is
//!   not Avro, its `schemaType`; replaying it gives the schema the next id
//!   if its type and text are new, and the subject its next version if the
//!   subject does not have it yet;
//! - a compatibility level is a record keyed by its subject (or none for
//!   the global one); the latest wins;
//! - a deletion is a record with a key of its own naming the subject, the
//!   version (or all of them) and whether it is permanent: a soft delete
//!   hides versions from lookups, listings and compatibility checks; a
//!   permanent one (only of what was soft-deleted first, as Confluent's
//!   registry requires) forgets them. Version numbers are never reused,
//!   and an id keeps naming its schema, since records written with it may
//!   still be in Kafka.
//!
//! A registration is checked for compatibility against the subject's
//! versions read up to the end of the log just before it is written.
//! Two workers registering different versions of one subject in the same
//! instant may both pass; Confluent's registry closes that window with a
//! single leader.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Compatibility, Registered, Registry, RegistryError, SchemaType};
use crate::kafka::KafkaClients;

/// The topic that holds the worker's schemas.
pub const TOPIC: &str = "_sluice_schemas";

/// The replayed log.
#[derive(Default)]
pub struct State {
    /// Schemas (type and text) by id - 1.
    schemas: Vec<(SchemaType, String)>,
    /// Ids by type and identity (`SchemaType::identity`: spacing, member
    /// order or a schema's form do not make a new id).
    ids: HashMap<(SchemaType, String), u32>,
    /// Each subject's versions, oldest first.
    subjects: BTreeMap<String, Vec<Version>>,
    global: Compatibility,
    levels: HashMap<String, Compatibility>,
}

/// One version of a subject.
#[derive(Debug, Clone, Copy)]
struct Version {
    number: u32,
    id: u32,
    /// Soft-deleted: kept, but hidden unless deleted ones are asked for.
    deleted: bool,
}

/// Why a deletion is refused, with Confluent's error code.
#[derive(Debug, PartialEq, Eq)]
pub enum DeleteRefused {
    SubjectNotFound,
    VersionNotFound,
    /// A soft delete of what is soft-deleted already (40404 / 40406).
    AlreadySoftDeleted,
    /// A permanent delete of what was not soft-deleted first (40405 / 40407).
    NotSoftDeletedFirst,
}

/// A schema's identity: its JSON, keys sorted, without whitespace.
pub fn normalise(schema: &str) -> Result<String, String> {
    fn sorted(v: Value) -> Value {
        match v {
            // Sorted here: serde_json keeps members in their order when
            // another crate turns on its `preserve_order`.
            Value::Object(members) => {
                let mut members: Vec<(String, Value)> = members.into_iter().collect();
                members.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(members.into_iter().map(|(k, v)| (k, sorted(v))).collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
            other => other,
        }
    }
    serde_json::from_str::<Value>(schema)
        .map(|v| sorted(v).to_string())
        .map_err(|e| format!("the schema is not JSON: {e}"))
}

impl State {
    fn apply(&mut self, key: &Value, value: Option<&Value>) {
        match key["type"].as_str() {
            Some("SCHEMA") => {
                let Some(v) = value else { return };
                let (Some(subject), Some(schema)) = (v["subject"].as_str(), v["schema"].as_str())
                else {
                    return;
                };
                let Some(schema_type) = v["schemaType"]
                    .as_str()
                    .map_or(Some(SchemaType::Avro), SchemaType::parse)
                else {
                    return;
                };
                let Ok(norm) = schema_type.identity(schema) else {
                    return;
                };
                let id = match self.ids.get(&(schema_type, norm.clone())) {
                    Some(id) => *id,
                    None => {
                        self.schemas.push((schema_type, schema.to_string()));
                        let id = self.schemas.len() as u32;
                        self.ids.insert((schema_type, norm), id);
                        id
                    }
                };
                let versions = self.subjects.entry(subject.to_string()).or_default();
                if !versions.iter().any(|v| v.id == id && !v.deleted) {
                    let number = versions.last().map_or(1, |v| v.number + 1);
                    versions.push(Version {
                        number,
                        id,
                        deleted: false,
                    });
                }
            }
            Some("DELETE") => {
                let Some(subject) = key["subject"].as_str() else {
                    return;
                };
                let version = key["version"].as_u64().map(|v| v as u32);
                if self
                    .delete_refused(subject, version, key["permanent"] == true)
                    .is_some()
                {
                    return;
                }
                let Some(versions) = self.subjects.get_mut(subject) else {
                    return;
                };
                let chosen = |v: &Version| version.is_none_or(|n| v.number == n);
                if key["permanent"] == true {
                    versions.retain(|v| !(chosen(v) && v.deleted));
                    if versions.is_empty() {
                        self.subjects.remove(subject);
                    }
                } else {
                    for v in versions.iter_mut().filter(|v| chosen(v)) {
                        v.deleted = true;
                    }
                }
            }
            Some("CONFIG") => {
                let level = value
                    .and_then(|v| v["compatibilityLevel"].as_str())
                    .and_then(Compatibility::parse);
                match (key["subject"].as_str(), level) {
                    (None, Some(l)) => self.global = l,
                    (None, None) => self.global = Compatibility::default(),
                    (Some(s), Some(l)) => {
                        self.levels.insert(s.to_string(), l);
                    }
                    (Some(s), None) => {
                        self.levels.remove(s);
                    }
                }
            }
            _ => {}
        }
    }

    /// The subjects with a version (`deleted`: also those whose versions
    /// are all soft-deleted).
    pub fn subjects(&self, deleted: bool) -> Vec<String> {
        self.subjects
            .iter()
            .filter(|(_, v)| v.iter().any(|v| deleted || !v.deleted))
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// A subject's version numbers (`deleted`: soft-deleted ones too);
    /// `None` if it has none.
    pub fn versions(&self, subject: &str, deleted: bool) -> Option<Vec<u32>> {
        let numbers: Vec<u32> = self
            .subjects
            .get(subject)?
            .iter()
            .filter(|v| deleted || !v.deleted)
            .map(|v| v.number)
            .collect();
        (!numbers.is_empty()).then_some(numbers)
    }

    /// A version (`None`: the latest one not deleted); `deleted`: a
    /// soft-deleted one is found too.
    pub fn version_of(
        &self,
        subject: &str,
        version: Option<u32>,
        deleted: bool,
    ) -> Option<Registered> {
        let versions = self.subjects.get(subject)?;
        let found = match version {
            None => versions.iter().rev().find(|v| !v.deleted)?,
            Some(n) => versions
                .iter()
                .find(|v| v.number == n && (deleted || !v.deleted))?,
        };
        let (schema_type, schema) = self.schemas[found.id as usize - 1].clone();
        Some(Registered {
            subject: subject.to_string(),
            version: found.number,
            id: found.id,
            schema_type,
            schema,
        })
    }

    pub fn version(&self, subject: &str, version: Option<u32>) -> Option<Registered> {
        self.version_of(subject, version, false)
    }

    /// Why deleting `version` (or all) of `subject` is refused, if it is.
    pub fn delete_refused(
        &self,
        subject: &str,
        version: Option<u32>,
        permanent: bool,
    ) -> Option<DeleteRefused> {
        let Some(versions) = self.subjects.get(subject) else {
            return Some(DeleteRefused::SubjectNotFound);
        };
        let chosen: Vec<&Version> = versions
            .iter()
            .filter(|v| version.is_none_or(|n| v.number == n))
            .collect();
        if chosen.is_empty() {
            return Some(match version {
                Some(_) => DeleteRefused::VersionNotFound,
                None => DeleteRefused::SubjectNotFound,
            });
        }
        match (permanent, chosen.iter().all(|v| v.deleted)) {
            (false, true) => Some(DeleteRefused::AlreadySoftDeleted),
            (true, false) => Some(DeleteRefused::NotSoftDeletedFirst),
            _ => None,
        }
    }

    pub fn schema(&self, id: u32) -> Option<(SchemaType, String)> {
        self.schemas.get((id as usize).checked_sub(1)?).cloned()
    }

    /// The subjects and versions that hold this id.
    pub fn uses(&self, id: u32) -> Vec<(String, u32)> {
        self.subjects
            .iter()
            .filter_map(|(s, v)| {
                v.iter()
                    .find(|v| v.id == id && !v.deleted)
                    .map(|v| (s.clone(), v.number))
            })
            .collect()
    }

    pub fn find(&self, subject: &str, schema_type: SchemaType, schema: &str) -> Option<Registered> {
        let id = *self
            .ids
            .get(&(schema_type, schema_type.identity(schema).ok()?))?;
        let found = self
            .subjects
            .get(subject)?
            .iter()
            .find(|v| v.id == id && !v.deleted)?;
        self.version(subject, Some(found.number))
    }

    pub fn level(&self, subject: Option<&str>) -> Option<Compatibility> {
        match subject {
            None => Some(self.global),
            Some(s) => self.levels.get(s).copied(),
        }
    }

    /// Whether `schema` may be added to `subject` under its level.
    pub fn check(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<(), String> {
        let level = self.levels.get(subject).copied().unwrap_or(self.global);
        let existing: Vec<(SchemaType, &str)> = self
            .subjects
            .get(subject)
            .map(|v| {
                v.iter()
                    .filter(|v| !v.deleted)
                    .map(|v| {
                        let (t, s) = &self.schemas[v.id as usize - 1];
                        (*t, s.as_str())
                    })
                    .collect()
            })
            .unwrap_or_default();
        level.check(schema_type, schema, &existing)
    }
}

/// The topic: written by a producer, replayed by one reader.
struct Log {
    clients: KafkaClients,
    producer: rdkafka::producer::FutureProducer,
    reader: Mutex<Option<rdkafka::consumer::BaseConsumer<crate::kafka::LogReaderContext>>>,
    /// The next offset to replay.
    next: Mutex<i64>,
}

/// The built-in registry.
pub struct BuiltinRegistry {
    state: Arc<Mutex<State>>,
    /// `None`: in memory only (tests of the REST API without Kafka).
    log: Option<Arc<Log>>,
    /// Registrations and config changes, one at a time on this worker.
    writes: tokio::sync::Mutex<()>,
    topic_ready: tokio::sync::OnceCell<()>,
}

impl BuiltinRegistry {
    pub fn new(clients: Option<KafkaClients>) -> Result<Self, String> {
        let log = match clients {
            None => None,
            Some(clients) => {
                let producer = clients
                    .producer("sluice-schema-registry", &Default::default())
                    .map_err(|e| format!("the schema registry's producer: {e}"))?;
                Some(Arc::new(Log {
                    clients,
                    producer,
                    reader: Mutex::new(None),
                    next: Mutex::new(0),
                }))
            }
        };
        Ok(BuiltinRegistry {
            state: Arc::new(Mutex::new(State::default())),
            log,
            writes: tokio::sync::Mutex::new(()),
            topic_ready: tokio::sync::OnceCell::new(),
        })
    }

    async fn ensure_topic(&self, log: &Log) -> Result<(), RegistryError> {
        self.topic_ready
            .get_or_try_init(|| async {
                let replication = log.clients.offsets_topic().replication;
                log.clients
                    .ensure_internal_topic(TOPIC, 1, replication, true)
                    .await
                    .map(|_| ())
                    .map_err(|e| {
                        RegistryError::Unavailable(format!(
                            "cannot create the schemas topic `{TOPIC}`: {e:#}"
                        ))
                    })
            })
            .await
            .map(|_| ())
    }

    /// Replays the log up to its end.
    pub async fn catch_up(&self) -> Result<(), RegistryError> {
        let Some(log) = self.log.clone() else {
            return Ok(());
        };
        self.ensure_topic(&log).await?;
        let state = self.state.clone();
        tokio::task::spawn_blocking(move || log.replay(&state))
            .await
            .map_err(|e| RegistryError::Unavailable(format!("the schemas reader failed: {e}")))?
    }

    /// A read of the replayed state, after catching up.
    pub async fn read<T>(&self, f: impl FnOnce(&State) -> T) -> Result<T, RegistryError> {
        self.catch_up().await?;
        Ok(f(&self.state.lock().expect("schemas")))
    }

    async fn append(&self, key: Value, value: Option<Value>) -> Result<(), RegistryError> {
        let Some(log) = &self.log else {
            self.state
                .lock()
                .expect("schemas")
                .apply(&key, value.as_ref());
            return Ok(());
        };
        let record = sluice_sdk::Record {
            topic: TOPIC.to_string(),
            partition: 0,
            offset: -1,
            key: Some(key.to_string().into_bytes()),
            value: value.map(|v| v.to_string().into_bytes()),
            ..Default::default()
        };
        for r in crate::kafka::produce_each(&log.producer, std::slice::from_ref(&record)).await {
            r.map_err(|e| {
                RegistryError::Unavailable(format!(
                    "cannot write to `{TOPIC}`: {}",
                    e.full_message()
                ))
            })?;
        }
        self.catch_up().await
    }

    /// Registers `schema` under `subject` (a no-op if it is there, a
    /// refusal if the subject's level forbids it): its id.
    pub async fn register_checked(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<u32, RegistryError> {
        schema_type
            .validate(schema)
            .map_err(|e| RegistryError::Refused(format!("Invalid schema: {e}")))?;
        let _one = self.writes.lock().await;
        self.catch_up().await?;
        {
            let state = self.state.lock().expect("schemas");
            if let Some(r) = state.find(subject, schema_type, schema) {
                return Ok(r.id);
            }
            state.check(subject, schema_type, schema).map_err(|e| {
                RegistryError::Incompatible(format!(
                    "Schema being registered is incompatible with an earlier schema for subject \"{subject}\": {e}"
                ))
            })?;
        }
        let nonce: u128 = rand::random();
        let mut value = json!({"subject": subject, "schema": schema});
        if schema_type != SchemaType::Avro {
            value["schemaType"] = schema_type.name().into();
        }
        self.append(
            json!({"type": "SCHEMA", "subject": subject, "request": format!("{nonce:032x}")}),
            Some(value),
        )
        .await?;
        let state = self.state.lock().expect("schemas");
        state
            .find(subject, schema_type, schema)
            .map(|r| r.id)
            .ok_or_else(|| {
                RegistryError::Unavailable(format!(
                    "the registration of `{subject}` was written but not read back from `{TOPIC}`"
                ))
            })
    }

    /// Deletes `version` of `subject` (`None`: every version), softly or
    /// permanently: the versions deleted, or why it is refused.
    pub async fn delete(
        &self,
        subject: &str,
        version: Option<u32>,
        permanent: bool,
    ) -> Result<Result<Vec<u32>, DeleteRefused>, RegistryError> {
        let _one = self.writes.lock().await;
        self.catch_up().await?;
        let deleted = {
            let state = self.state.lock().expect("schemas");
            if let Some(refused) = state.delete_refused(subject, version, permanent) {
                return Ok(Err(refused));
            }
            state.subjects[subject]
                .iter()
                .filter(|v| version.is_none_or(|n| v.number == n))
                .filter(|v| permanent || !v.deleted)
                .map(|v| v.number)
                .collect()
        };
        let nonce: u128 = rand::random();
        self.append(
            json!({"type": "DELETE", "subject": subject, "version": version,
                   "permanent": permanent, "request": format!("{nonce:032x}")}),
            Some(json!({})),
        )
        .await?;
        Ok(Ok(deleted))
    }

    /// Sets (`Some`) or removes (`None`) a compatibility level; no subject
    /// for the global one.
    pub async fn set_level(
        &self,
        subject: Option<&str>,
        level: Option<Compatibility>,
    ) -> Result<(), RegistryError> {
        let _one = self.writes.lock().await;
        self.append(
            json!({"type": "CONFIG", "subject": subject}),
            level.map(|l| json!({"compatibilityLevel": l.name()})),
        )
        .await
    }
}

impl Log {
    fn replay(&self, state: &Mutex<State>) -> Result<(), RegistryError> {
        use rdkafka::consumer::Consumer;
        use rdkafka::error::KafkaError;
        use rdkafka::{Message, Offset, TopicPartitionList};
        let unavailable = |what: &str, e: KafkaError| {
            RegistryError::Unavailable(format!("{what} `{TOPIC}`: {e}"))
        };
        let mut reader = self.reader.lock().expect("schemas reader");
        let mut next = self.next.lock().expect("schemas offset");
        if reader.is_none() {
            let consumer = self
                .clients
                .log_reader()
                .map_err(|e| unavailable("cannot read", e))?;
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(TOPIC, 0, Offset::Offset(*next))
                .map_err(|e| unavailable("cannot read", e))?;
            consumer
                .assign(&tpl)
                .map_err(|e| unavailable("cannot read", e))?;
            *reader = Some(consumer);
        }
        let consumer = reader.as_ref().expect("set above");
        let deadline = Instant::now() + Duration::from_secs(30);
        // A topic just created may have no leader for a moment.
        let high = loop {
            match consumer.fetch_watermarks(TOPIC, 0, Duration::from_secs(10)) {
                Ok((_, high)) => break high,
                Err(e) if Instant::now() > deadline => {
                    return Err(unavailable("cannot find the end of", e));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        while *next < high {
            if Instant::now() > deadline {
                return Err(RegistryError::Unavailable(format!(
                    "reading `{TOPIC}` did not reach offset {high} within 30 s (at {})",
                    *next
                )));
            }
            match consumer.poll(Duration::from_millis(100)) {
                None | Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => return Err(unavailable("cannot read", e)),
                Some(Ok(m)) => {
                    *next = m.offset() + 1;
                    let Some(key) = m
                        .key()
                        .and_then(|k| serde_json::from_slice::<Value>(k).ok())
                    else {
                        tracing::warn!(
                            topic = TOPIC,
                            offset = m.offset(),
                            "skipping a record whose key is not JSON"
                        );
                        continue;
                    };
                    let value = m
                        .payload()
                        .and_then(|v| serde_json::from_slice::<Value>(v).ok());
                    state.lock().expect("schemas").apply(&key, value.as_ref());
                }
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Registry for BuiltinRegistry {
    async fn schema_by_id(&self, id: u32) -> Result<(SchemaType, String), RegistryError> {
        if let Some(s) = self.state.lock().expect("schemas").schema(id) {
            return Ok(s);
        }
        self.read(|s| s.schema(id)).await?.ok_or_else(|| {
            RegistryError::NotFound(format!(
                "the built-in schema registry has no schema with id {id}"
            ))
        })
    }

    async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<u32, RegistryError> {
        self.register_checked(subject, schema_type, schema).await
    }

    async fn lookup(
        &self,
        subject: &str,
        schema_type: SchemaType,
        schema: &str,
    ) -> Result<Option<Registered>, RegistryError> {
        self.read(|s| s.find(subject, schema_type, schema)).await
    }

    async fn latest(&self, subject: &str) -> Result<Option<Registered>, RegistryError> {
        self.read(|s| s.version(subject, None)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn ids_and_versions_follow_the_log() {
        let r = BuiltinRegistry::new(None).unwrap();
        let a = r#"{"type":"record","name":"A","fields":[{"name":"x","type":"long"}]}"#;
        let a_spaced =
            r#"{ "name": "A", "type": "record", "fields": [ {"type": "long", "name": "x"} ] }"#;
        let b = r#"{"type":"record","name":"A","fields":[{"name":"x","type":"long"},{"name":"y","type":["null","string"],"default":null}]}"#;
        assert_eq!(r.register("s-value", SchemaType::Avro, a).await.unwrap(), 1);
        assert_eq!(
            r.register("s-value", SchemaType::Avro, a_spaced)
                .await
                .unwrap(),
            1,
            "the same schema, spaced"
        );
        assert_eq!(
            r.register("t-value", SchemaType::Avro, a).await.unwrap(),
            1,
            "one id across subjects"
        );
        assert_eq!(r.register("s-value", SchemaType::Avro, b).await.unwrap(), 2);
        let latest = r.latest("s-value").await.unwrap().unwrap();
        assert_eq!((latest.version, latest.id), (2, 2));
        assert_eq!(
            r.lookup("t-value", SchemaType::Avro, b).await.unwrap(),
            None
        );
        let required = r#"{"type":"record","name":"A","fields":[{"name":"x","type":"long"},{"name":"z","type":"string"}]}"#;
        let e = r
            .register("s-value", SchemaType::Avro, required)
            .await
            .unwrap_err();
        assert!(matches!(e, RegistryError::Incompatible(_)), "{e}");
        r.set_level(Some("s-value"), Some(Compatibility::None))
            .await
            .unwrap();
        assert_eq!(
            r.register("s-value", SchemaType::Avro, required)
                .await
                .unwrap(),
            3
        );
        let e = r
            .register("s-value", SchemaType::Avro, "{\"type\":\"nope\"}")
            .await
            .unwrap_err();
        assert!(matches!(e, RegistryError::Refused(_)), "{e}");
    }

    #[tokio::test]
    async fn deletes_hide_versions_then_forget_them() {
        let r = BuiltinRegistry::new(None).unwrap();
        let v1 = r#"{"type":"record","name":"D","fields":[{"name":"x","type":"long"}]}"#;
        let v2 = r#"{"type":"record","name":"D","fields":[{"name":"x","type":"long"},{"name":"y","type":["null","string"],"default":null}]}"#;
        assert_eq!(r.register("d", SchemaType::Avro, v1).await.unwrap(), 1);
        assert_eq!(r.register("d", SchemaType::Avro, v2).await.unwrap(), 2);
        let refused = r.delete("d", Some(1), true).await.unwrap();
        assert_eq!(refused, Err(DeleteRefused::NotSoftDeletedFirst));
        assert_eq!(r.delete("d", Some(2), false).await.unwrap(), Ok(vec![2]));
        assert_eq!(
            r.delete("d", Some(2), false).await.unwrap(),
            Err(DeleteRefused::AlreadySoftDeleted)
        );
        let state = |f: fn(&State) -> Value| r.read(f);
        assert_eq!(
            state(|s| json!([s.versions("d", false), s.versions("d", true)]))
                .await
                .unwrap(),
            json!([[1], [1, 2]])
        );
        // The latest is version 1 again, and checks skip the deleted one.
        assert_eq!(r.latest("d").await.unwrap().unwrap().version, 1);
        assert_eq!(r.lookup("d", SchemaType::Avro, v2).await.unwrap(), None);
        // Re-registered: a new version; the id stays the schema's.
        assert_eq!(r.register("d", SchemaType::Avro, v2).await.unwrap(), 2);
        assert_eq!(r.latest("d").await.unwrap().unwrap().version, 3);
        assert_eq!(r.delete("d", None, false).await.unwrap(), Ok(vec![1, 3]));
        assert_eq!(
            state(|s| json!([s.subjects(false), s.subjects(true)]))
                .await
                .unwrap(),
            json!([[], ["d"]])
        );
        assert_eq!(r.delete("d", None, true).await.unwrap(), Ok(vec![1, 2, 3]));
        assert_eq!(
            r.delete("d", None, true).await.unwrap(),
            Err(DeleteRefused::SubjectNotFound)
        );
        // Ids keep naming their schemas: records written with them remain.
        assert_eq!(
            r.schema_by_id(2).await.unwrap(),
            (SchemaType::Avro, v2.to_string())
        );
        // Forgotten for good: the subject starts again at version 1.
        assert_eq!(r.register("d", SchemaType::Avro, v1).await.unwrap(), 1);
        assert_eq!(r.latest("d").await.unwrap().unwrap().version, 1);
    }
}
