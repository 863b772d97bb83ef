//! What the benches share: the order records they all measure with.

#![allow(dead_code)] // each bench uses a part

use sluice_sdk::Record;

/// An order event as JSON, about 170 bytes.
pub fn order_json(i: usize) -> String {
    format!(
        r#"{{"order_id":{i},"customer_id":"cust-{:05}","amount":{}.{:02},"currency":"EUR","status":"shipped","updated_at":"2026-01-01T00:00:{:02}.000Z"}}"#,
        i % 1000,
        10 + i % 500,
        i % 100,
        i % 60
    )
}

/// The order as a consumed record, keyed by its id.
pub fn order(i: usize) -> Record {
    Record {
        topic: "orders".into(),
        partition: 0,
        offset: i as i64,
        timestamp: Some(1_767_225_600_000),
        key: Some(i.to_string().into_bytes()),
        value: Some(order_json(i).into_bytes()),
        headers: vec![],
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
