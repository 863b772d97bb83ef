//! The JDBC sink's value conversion (`plugins/jdbc/src/value.rs`): a
//! record's JSON value read straight into column values (`ParsedValue`) must
//! be what the JSON tree gives (`SqlValue::from_json`), as documented (a
//! number that is not an i64 aside: how its digits are kept is the sink's
//! choice); and each value's coercion into a column's kind never panics,
//! keeps a value of that kind as it is, and loses no information ("where no
//! information is lost"): coerced back, it is the value again.
#![no_main]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use libfuzzer_sys::fuzz_target;
use sluice_connector_jdbc::value::{ColumnKind, KeyRef, ParsedValue, SqlValue};

const KINDS: [ColumnKind; 4] = [
    ColumnKind::Int,
    ColumnKind::Float,
    ColumnKind::Bool,
    ColumnKind::Text,
];

fn hash(k: &KeyRef<'_>) -> u64 {
    let mut h = DefaultHasher::new();
    k.hash(&mut h);
    h.finish()
}

fn check_coercions(v: &SqlValue) {
    // Text is parsed leniently (trimmed): only these must come back as they were.
    let exact = matches!(v, SqlValue::Int(_) | SqlValue::Float(_) | SqlValue::Bool(_));
    for kind in KINDS {
        let coerced = v.clone().coerce(kind);
        if (exact || matches!(v, SqlValue::Text(_))) && v.kind() == Some(kind) {
            assert_eq!(coerced.as_ref(), Ok(v), "{v:?} into its own kind");
        }
        let (Ok(c), Some(original), true) = (&coerced, v.kind(), exact) else {
            continue;
        };
        let back = c.clone().coerce(original);
        assert_eq!(
            back.as_ref(),
            Ok(v),
            "{v:?} into a {kind:?} column is {c:?}: information was lost"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(declared) = std::str::from_utf8(data) {
        let _ = ColumnKind::from_declared(declared);
    }
    let parsed = ParsedValue::parse(data);
    let tree = serde_json::from_slice::<serde_json::Value>(data);
    let fields = match (&parsed, &tree) {
        (Ok(p), Ok(t)) => {
            let expected = match t {
                serde_json::Value::Object(o) => ParsedValue::Object(
                    o.iter()
                        .map(|(k, v)| (k.clone(), SqlValue::from_json(v)))
                        .collect(),
                ),
                serde_json::Value::Null => ParsedValue::Null,
                _ => {
                    assert!(matches!(p, ParsedValue::Other(_)), "{t} read as {p:?}");
                    return;
                }
            };
            match (p, &expected) {
                (ParsedValue::Object(got), ParsedValue::Object(want)) => {
                    assert_eq!(got.len(), want.len(), "{t} read as {p:?}");
                    let tree = t.as_object().expect("an object");
                    for ((name, got), ((wname, want), json)) in
                        got.iter().zip(want.iter().zip(tree.values()))
                    {
                        assert_eq!(name, wname, "{t} read as {p:?}");
                        if !json.is_number() || json.is_i64() {
                            assert_eq!(got, want, "field `{name}` of {t}");
                        }
                    }
                    got.clone()
                }
                _ => {
                    assert_eq!(p, &expected, "{t}");
                    return;
                }
            }
        }
        (Err(_), Err(_)) => return,
        (p, t) => panic!("the reader says {p:?}, the JSON tree {t:?}"),
    };
    let values: Vec<SqlValue> = fields.into_iter().map(|(_, v)| v).collect();
    for v in &values {
        check_coercions(v);
        assert!(!v.is_older_than(v), "{v:?} older than itself");
    }
    for pair in values.windows(2) {
        assert!(
            !(pair[0].is_older_than(&pair[1]) && pair[1].is_older_than(&pair[0])),
            "{pair:?} each older than the other"
        );
    }
    let key = KeyRef(&values);
    let copy = values.clone();
    let same = KeyRef(&copy);
    assert!(key == same);
    assert_eq!(hash(&key), hash(&same));
});
