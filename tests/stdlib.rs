//! Every standard transform (plugins/transforms), configured with Kafka
//! Connect's class names, run as a real component through the host.

use serde_json::{Value, json};
use sluice_runtime::config::CommonConfig;
use sluice_runtime::metrics::Metrics;
use sluice_runtime::transform::wasm::WasmHost;
use sluice_runtime::transform::{CompiledChain, TransformChain};
use sluice_sdk::{ConfigMap, ErrorKind, Header, Record};

use crate::fixtures;

const SMT: &str = "org.apache.kafka.connect.transforms.";

fn chain_for(keys: &[(&str, &str)]) -> Result<TransformChain, String> {
    let mut config: ConfigMap = [
        ("name", "s"),
        ("connector.class", "datagen"),
        ("transforms", "t"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (k, v) in keys {
        config.insert(format!("transforms.t.{k}"), v.to_string());
    }
    let (mut common, _) = CommonConfig::split(&config).map_err(|e| e.to_string())?;
    common
        .resolve_standard_transforms(Some(fixtures::standard_library()))
        .map_err(|e| e.to_string())?;
    let metrics = Metrics::new();
    let host = WasmHost::new(
        Some(fixtures::wasm_cache_dir()),
        metrics.wasm_compilations.clone(),
    )
    .unwrap();
    let compiled =
        CompiledChain::compile(&host, &common.transforms).map_err(|(k, m)| format!("{k}: {m}"))?;
    compiled
        .instantiate(&metrics, "s", 0)
        .map_err(|e| e.message)
}

fn record(key: Value, value: Value) -> Record {
    Record {
        topic: "orders".into(),
        partition: 2,
        offset: 40,
        timestamp: Some(1_767_225_600_000),
        key: Some(serde_json::to_vec(&key).unwrap()),
        value: Some(serde_json::to_vec(&value).unwrap()),
        headers: vec![],
        ..Default::default()
    }
}

fn run(keys: &[(&str, &str)], input: Record) -> Vec<Record> {
    let mut chain = chain_for(keys).unwrap_or_else(|e| panic!("{keys:?}: {e}"));
    chain
        .apply(vec![input])
        .pop()
        .unwrap()
        .unwrap_or_else(|f| panic!("{keys:?}: {}", f.error.full_message()))
}

fn one(keys: &[(&str, &str)], input: Record) -> Record {
    let mut out = run(keys, input);
    assert_eq!(out.len(), 1, "{keys:?}");
    out.pop().unwrap()
}

fn value(r: &Record) -> Value {
    serde_json::from_slice(r.value.as_deref().unwrap()).unwrap()
}

fn key(r: &Record) -> Value {
    serde_json::from_slice(r.key.as_deref().unwrap()).unwrap()
}

#[test]
fn insert_field() {
    let t = format!("{SMT}InsertField$Value");
    let r = one(
        &[
            ("type", &t),
            ("topic.field", "t"),
            ("partition.field", "p!"),
            ("offset.field", "o?"),
            ("timestamp.field", "ts"),
            ("static.field", "src"),
            ("static.value", "web"),
        ],
        record(json!(1), json!({"a": 1})),
    );
    assert_eq!(
        value(&r),
        json!({"a": 1, "t": "orders", "p": 2, "o": 40, "ts": 1_767_225_600_000i64, "src": "web"})
    );
    let t = format!("{SMT}InsertField$Key");
    let r = one(
        &[
            ("type", &t),
            ("static.field", "region"),
            ("static.value", "eu"),
        ],
        record(json!({"id": 1}), json!({})),
    );
    assert_eq!(key(&r), json!({"id": 1, "region": "eu"}));
}

#[test]
fn replace_field() {
    let t = format!("{SMT}ReplaceField$Value");
    let r = one(
        &[("type", &t), ("exclude", "b"), ("renames", "a:x,c:y")],
        record(json!(1), json!({"a": 1, "b": 2, "c": 3})),
    );
    assert_eq!(value(&r), json!({"x": 1, "y": 3}));
    let r = one(
        &[("type", &t), ("include", "a,c")],
        record(json!(1), json!({"a": 1, "b": 2, "c": 3})),
    );
    assert_eq!(value(&r), json!({"a": 1, "c": 3}));
}

#[test]
fn mask_field() {
    let t = format!("{SMT}MaskField$Value");
    let r = one(
        &[("type", &t), ("fields", "ssn,n,ok,tags")],
        record(
            json!(1),
            json!({"ssn": "123", "n": 7.5, "ok": true, "tags": ["x"], "keep": "y"}),
        ),
    );
    assert_eq!(
        value(&r),
        json!({"ssn": "", "n": 0.0, "ok": false, "tags": [], "keep": "y"})
    );
    let r = one(
        &[("type", &t), ("fields", "ssn"), ("replacement", "***")],
        record(json!(1), json!({"ssn": "123"})),
    );
    assert_eq!(value(&r), json!({"ssn": "***"}));
}

#[test]
fn filter_by_condition_and_by_predicate() {
    let t = format!("{SMT}Filter");
    let keys = [
        ("type", t.as_str()),
        ("field", "amount"),
        ("operator", "gt"),
        ("value", "100"),
    ];
    assert!(
        run(&keys, record(json!(1), json!({"amount": 150}))).is_empty(),
        "dropped"
    );
    assert_eq!(
        run(&keys, record(json!(1), json!({"amount": 50}))).len(),
        1,
        "kept"
    );
    let keys = [
        ("type", t.as_str()),
        ("field", "customer.tier"),
        ("operator", "matches"),
        ("value", "gold|platinum"),
    ];
    assert!(
        run(
            &keys,
            record(json!(1), json!({"customer": {"tier": "gold"}}))
        )
        .is_empty()
    );
    assert_eq!(
        run(
            &keys,
            record(json!(1), json!({"customer": {"tier": "bronze"}}))
        )
        .len(),
        1
    );
    // Kafka Connect's use: no condition, a predicate chooses what to drop.
    let mut config: ConfigMap = [
        ("name", "s"),
        ("connector.class", "datagen"),
        ("transforms", "t"),
        ("transforms.t.type", t.as_str()),
        ("transforms.t.predicate", "tomb"),
        ("predicates", "tomb"),
        ("predicates.tomb.type", "RecordIsTombstone"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    config.insert("transforms.t.negate".into(), "false".into());
    let (mut common, _) = CommonConfig::split(&config).unwrap();
    common
        .resolve_standard_transforms(Some(fixtures::standard_library()))
        .unwrap();
    let metrics = Metrics::new();
    let host = WasmHost::new(
        Some(fixtures::wasm_cache_dir()),
        metrics.wasm_compilations.clone(),
    )
    .unwrap();
    let mut chain = CompiledChain::compile(&host, &common.transforms)
        .unwrap()
        .instantiate(&metrics, "s", 0)
        .unwrap();
    let mut tombstone = record(json!(1), json!(null));
    tombstone.value = None;
    let out = chain.apply(vec![tombstone, record(json!(2), json!({"a": 1}))]);
    assert!(out[0].as_ref().unwrap().is_empty(), "tombstone dropped");
    assert_eq!(out[1].as_ref().unwrap().len(), 1, "others kept");
}

#[test]
fn cast() {
    let t = format!("{SMT}Cast$Value");
    let r = one(
        &[
            ("type", &t),
            ("spec", "amount:int32,flag:string,n:float64,b:boolean"),
        ],
        record(
            json!(1),
            json!({"amount": "42", "flag": true, "n": 3, "b": "TRUE"}),
        ),
    );
    assert_eq!(
        value(&r),
        json!({"amount": 42, "flag": "true", "n": 3.0, "b": true})
    );
    let mut chain = chain_for(&[("type", &t), ("spec", "amount:int8")]).unwrap();
    let out = chain.apply(vec![record(json!(1), json!({"amount": 1000}))]);
    let f = out[0].as_ref().unwrap_err();
    assert_eq!(f.error.kind, ErrorKind::Data);
    assert!(
        f.error.message.contains("out of range"),
        "{}",
        f.error.message
    );
    let t = format!("{SMT}Cast$Key");
    assert_eq!(
        key(&one(
            &[("type", &t), ("spec", "string")],
            record(json!(17), json!({}))
        )),
        json!("17")
    );
}

#[test]
fn timestamp_converter() {
    let t = format!("{SMT}TimestampConverter$Value");
    let r = one(
        &[("type", &t), ("field", "at"), ("target.type", "unix")],
        record(json!(1), json!({"at": "2026-01-01T00:00:01.500Z"})),
    );
    assert_eq!(value(&r), json!({"at": 1_767_225_601_500i64}));
    let r = one(
        &[
            ("type", &t),
            ("field", "at"),
            ("target.type", "string"),
            ("format", "yyyy-MM-dd HH:mm:ss"),
            ("unix.precision", "seconds"),
        ],
        record(json!(1), json!({"at": 1_767_225_601})),
    );
    assert_eq!(value(&r), json!({"at": "2026-01-01 00:00:01"}));
    let r = one(
        &[("type", &t), ("field", "at"), ("target.type", "Date")],
        record(json!(1), json!({"at": "2026-01-01T13:00:00Z"})),
    );
    assert_eq!(value(&r), json!({"at": 1_767_225_600_000i64}));
}

#[test]
fn extract_field_value_to_key_and_hoist_field() {
    let t = format!("{SMT}ExtractField$Key");
    assert_eq!(
        key(&one(
            &[("type", &t), ("field", "id")],
            record(json!({"id": 9}), json!({}))
        )),
        json!(9)
    );
    let t = format!("{SMT}ExtractField$Value");
    let r = one(
        &[
            ("type", &t),
            ("field", "a.b"),
            ("field.syntax.version", "V2"),
        ],
        record(json!(1), json!({"a": {"b": [1]}})),
    );
    assert_eq!(value(&r), json!([1]));
    let r = one(
        &[
            ("type", &format!("{SMT}ValueToKey")),
            ("fields", "order_id,region"),
        ],
        record(json!(null), json!({"order_id": 5, "region": "eu", "x": 1})),
    );
    assert_eq!(key(&r), json!({"order_id": 5, "region": "eu"}));
    let r = one(
        &[
            ("type", &format!("{SMT}HoistField$Value")),
            ("field", "payload"),
        ],
        record(json!(1), json!([1, 2])),
    );
    assert_eq!(value(&r), json!({"payload": [1, 2]}));
}

#[test]
fn regex_router() {
    let t = format!("{SMT}RegexRouter");
    let r = one(
        &[
            ("type", &t),
            ("regex", "ord(.*)"),
            ("replacement", "archive-$1x"),
        ],
        record(json!(1), json!({})),
    );
    assert_eq!(r.topic, "archive-ersx");
    let r = one(
        &[("type", &t), ("regex", "payments"), ("replacement", "p")],
        record(json!(1), json!({})),
    );
    assert_eq!(
        r.topic, "orders",
        "a topic that does not match keeps its name"
    );
}

#[test]
fn insert_header_header_from_and_latency_stamp() {
    let r = one(
        &[
            ("type", &format!("{SMT}InsertHeader")),
            ("header", "source"),
            ("value.literal", "sluice"),
        ],
        record(json!(1), json!({})),
    );
    assert_eq!(
        r.headers,
        vec![Header {
            key: "source".into(),
            value: Some(b"sluice".to_vec())
        }]
    );
    let r = one(
        &[
            ("type", &format!("{SMT}HeaderFrom$Value")),
            ("fields", "id,tenant"),
            ("headers", "h-id,h-tenant"),
            ("operation", "move"),
        ],
        record(json!(1), json!({"id": 3, "tenant": "acme", "x": 1})),
    );
    assert_eq!(value(&r), json!({"x": 1}));
    assert_eq!(
        r.headers,
        vec![
            Header {
                key: "h-id".into(),
                value: Some(b"3".to_vec())
            },
            Header {
                key: "h-tenant".into(),
                value: Some(b"acme".to_vec())
            }
        ]
    );
    let before = chrono_now_ms();
    let r = one(&[("type", "LatencyStamp")], record(json!(1), json!({})));
    let stamp = i64::from_be_bytes(
        r.last_header("x-produce-timestamp-ms")
            .unwrap()
            .value
            .clone()
            .unwrap()
            .try_into()
            .unwrap(),
    );
    assert!(stamp >= before && stamp <= chrono_now_ms(), "{stamp}");
    let mut stamped = record(json!(1), json!({}));
    stamped.add_header("x-produce-timestamp-ms", Some(7i64.to_be_bytes().to_vec()));
    let r = one(&[("type", "LatencyStamp")], stamped);
    assert_eq!(r.headers.len(), 1, "an existing stamp is kept");
    assert_eq!(r.headers[0].value.as_deref(), Some(&7i64.to_be_bytes()[..]));
}

fn chrono_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn bad_standard_transform_configs_are_named() {
    let t = format!("{SMT}InsertField$Value");
    let err = chain_for(&[
        ("type", &t),
        ("static.field", "a"),
        ("static.value", "b"),
        ("colour", "red"),
    ])
    .err()
    .unwrap();
    assert!(
        err.contains("InsertField$Value: key `colour` is not supported"),
        "{err}"
    );
    let err = chain_for(&[("type", &format!("{SMT}HoistField$Value"))])
        .err()
        .unwrap();
    assert!(err.contains("key `field` is required"), "{err}");
    let err = chain_for(&[("type", &format!("{SMT}SetSchemaMetadata$Value"))])
        .err()
        .unwrap();
    assert!(
        err.contains("key `transforms.t.type`") && err.contains("InsertField"),
        "{err}"
    );
    let err = chain_for(&[("type", &format!("{SMT}Cast$Value")), ("spec", "a:decimal")])
        .err()
        .unwrap();
    assert!(err.contains("`decimal` is not a type"), "{err}");
}

#[test]
fn a_missing_library_is_reported_by_key() {
    let config: ConfigMap = [
        ("name", "s"),
        ("connector.class", "datagen"),
        ("transforms", "t"),
        ("transforms.t.type", "InsertField$Value"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let (mut common, _) = CommonConfig::split(&config).unwrap();
    let err = common
        .resolve_standard_transforms(Some(std::path::Path::new(
            "/nowhere/sluice_transforms.wasm",
        )))
        .unwrap_err();
    assert_eq!(err.key.as_deref(), Some("transforms.t.type"));
    assert!(
        err.message.contains("/nowhere/sluice_transforms.wasm")
            && err.message.contains("transforms.library"),
        "{err}"
    );
}

/// The runtime maps Kafka Connect's SMT class names onto the library's
/// transforms by name: its list and the library's own must be the same. The
/// library says its list when asked for a kind it does not have.
#[test]
fn the_runtime_and_the_library_name_the_same_standard_transforms() {
    let library = fixtures::standard_library().to_str().unwrap().to_string();
    let refused = chain_for(&[
        ("type", "wasm"),
        ("module", library.as_str()),
        ("kind", "NoSuchTransform"),
    ])
    .err()
    .expect("the library refuses a kind it does not have");
    let listed = refused
        .rsplit_once("known: ")
        .unwrap_or_else(|| panic!("the library's refusal lists its transforms: {refused}"))
        .1;
    let library_names: std::collections::BTreeSet<&str> = listed
        .split(',')
        .map(|n| n.trim().trim_end_matches(|c: char| !c.is_alphanumeric()))
        .collect();
    let runtime_names: std::collections::BTreeSet<&str> =
        sluice_runtime::config::STANDARD_TRANSFORMS
            .into_iter()
            .collect();
    assert_eq!(library_names, runtime_names);
}
