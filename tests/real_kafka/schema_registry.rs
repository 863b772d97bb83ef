//! The built-in schema registry on Apache Kafka: its schemas live in the
//! compacted `_sluice_schemas` topic, so a worker started later, and
//! another worker of the same cluster, serve the same ids, versions and
//! compatibility levels. (The embedded broker keeps nothing across a
//! restart; the API itself is checked with Confluent's client in
//! `tests/schema_registry.rs`.)

use sluice_runtime::schema::registry::{Compatibility, Registry, RegistryError, SchemaType};

use super::broker;
use crate::fixtures::InProcess;

fn record(fields: &str) -> String {
    format!(r#"{{"type":"record","name":"Thing","namespace":"persisted","fields":[{fields}]}}"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn schemas_outlive_the_worker_and_are_shared_by_a_cluster() {
    let bootstrap = broker().bootstrap.clone();
    let subject = format!(
        "persisted-{}-{}-value",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    let v1 = record(r#"{"name":"a","type":"long"}"#);
    let v2 = record(
        r#"{"name":"a","type":"long"},{"name":"b","type":["null","string"],"default":null}"#,
    );
    let v3 = record(
        r#"{"name":"a","type":"long"},{"name":"b","type":["null","string"],"default":null},{"name":"c","type":"string"}"#,
    );

    let first = InProcess::start_on(&bootstrap);
    let second = InProcess::start_on(&bootstrap);
    let one = first.worker.schema_registry();
    let two = second.worker.schema_registry();
    let id1 = one.register(&subject, SchemaType::Avro, &v1).await.unwrap();
    // Registered on one worker, known to the other.
    assert_eq!(
        two.schema_by_id(id1).await.unwrap(),
        (SchemaType::Avro, v1.clone())
    );
    let id2 = two.register(&subject, SchemaType::Avro, &v2).await.unwrap();
    assert_ne!(id1, id2);
    assert_eq!(
        one.register(&subject, SchemaType::Avro, &v2).await.unwrap(),
        id2,
        "the same id on every worker"
    );
    // BACKWARD by default, enforced on either worker.
    let refused = one
        .register(&subject, SchemaType::Avro, &v3)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, RegistryError::Incompatible(_)),
        "{refused}"
    );
    two.set_level(Some(&subject), Some(Compatibility::Forward))
        .await
        .unwrap();
    let id3 = one.register(&subject, SchemaType::Avro, &v3).await.unwrap();
    // A JSON Schema keeps its type in the topic.
    let json_subject = format!("{subject}-json");
    let json_schema = r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#;
    let json_id = two
        .register(&json_subject, SchemaType::Json, json_schema)
        .await
        .unwrap();
    // A soft delete on one worker hides version 2 everywhere (its id
    // still names its schema).
    assert_eq!(
        two.delete(&subject, Some(2), false).await.unwrap(),
        Ok(vec![2])
    );
    drop(first);
    drop(second);

    // A worker started afterwards replays the topic: the same answers.
    let later = InProcess::start_on(&bootstrap);
    let r = later.worker.schema_registry();
    let latest = r
        .latest(&subject)
        .await
        .unwrap()
        .expect("the subject survives");
    assert_eq!(
        (latest.version, latest.id, latest.schema.as_str()),
        (3, id3, v3.as_str())
    );
    let found = r
        .lookup(&subject, SchemaType::Avro, &v1)
        .await
        .unwrap()
        .expect("version 1 survives");
    assert_eq!((found.version, found.id), (1, id1));
    assert_eq!(r.schema_by_id(id2).await.unwrap(), (SchemaType::Avro, v2));
    assert_eq!(
        r.schema_by_id(json_id).await.unwrap(),
        (SchemaType::Json, json_schema.to_string())
    );
    let versions = r
        .read(|s| (s.versions(&subject, false), s.versions(&subject, true)))
        .await
        .unwrap();
    assert_eq!(versions, (Some(vec![1, 3]), Some(vec![1, 2, 3])));
    let level = r.read(|s| s.level(Some(&subject))).await.unwrap();
    assert_eq!(level, Some(Compatibility::Forward));
}
