//! The CDC demo's transform: masks e-mail addresses in change events on
//! their way to a replica, keeping the domain (`ann@example.com` becomes
//! `***@example.com`), so the replica can be shared without the personal
//! part.
//!
//! Debezium's envelope (`before` and `after`) is masked in both rows; any
//! other JSON object has its top-level fields masked. Tombstones and
//! events without the fields pass through.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `fields` | `email` | comma-separated fields to mask |

use serde::Deserialize;
use serde_json::Value;
use sluice_sdk::config::from_string_map;
use sluice_sdk::guest::{Config, Transform};
use sluice_sdk::{ConnectError, Record};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MaskEmail {
    #[serde(default = "default_fields")]
    fields: Vec<String>,
}

fn default_fields() -> Vec<String> {
    vec!["email".into()]
}

/// `***@domain`; a value without `@` is masked whole.
fn mask(address: &str) -> String {
    match address.rsplit_once('@') {
        Some((_, domain)) => format!("***@{domain}"),
        None => "***".into(),
    }
}

impl MaskEmail {
    fn mask_row(&self, row: &mut Value) {
        let Some(object) = row.as_object_mut() else {
            return;
        };
        for field in &self.fields {
            if let Some(Value::String(s)) = object.get_mut(field) {
                *s = mask(s);
            }
        }
    }
}

impl Transform for MaskEmail {
    fn configure(config: Config) -> Result<Self, ConnectError> {
        from_string_map(&config).map_err(|e| ConnectError::fatal(e.to_string()))
    }

    fn transform(&mut self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        if record.value.is_none() {
            return Ok(vec![record]);
        }
        let mut value = record.value_json().map_err(|e| {
            ConnectError::data(format!(
                "value of {} is not JSON: {e}",
                record.coordinates()
            ))
        })?;
        let is_envelope = value
            .as_object()
            .is_some_and(|o| o.contains_key("op") && o.contains_key("after"));
        if is_envelope {
            for row in ["before", "after"] {
                if let Some(r) = value.get_mut(row) {
                    self.mask_row(r);
                }
            }
        } else {
            self.mask_row(&mut value);
        }
        record.set_value_json(&value);
        Ok(vec![record])
    }
}

sluice_sdk::export_transform!(MaskEmail);
