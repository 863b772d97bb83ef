//! The reference transform, in Rust with the Sluice SDK: parses the JSON
//! value, uppercases one field, adds a field, drops records flagged for
//! dropping, and rejects a value that is not JSON with a `data` error.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `uppercase.field` | `status` | string field to uppercase |
//! | `add.field` | `processed_by` | field to add |
//! | `add.value` | `sluice` | its value |
//! | `drop.field` | `drop` | records whose value has this field set to `true` are dropped |

use serde::Deserialize;
use sluice_sdk::config::from_string_map;
use sluice_sdk::guest::{Config, Transform};
use sluice_sdk::{ConnectError, Record};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reference {
    #[serde(rename = "uppercase.field", default = "default_uppercase")]
    uppercase_field: String,
    #[serde(rename = "add.field", default = "default_add_field")]
    add_field: String,
    #[serde(rename = "add.value", default = "default_add_value")]
    add_value: String,
    #[serde(rename = "drop.field", default = "default_drop")]
    drop_field: String,
}

fn default_uppercase() -> String {
    "status".into()
}
fn default_add_field() -> String {
    "processed_by".into()
}
fn default_add_value() -> String {
    "sluice".into()
}
fn default_drop() -> String {
    "drop".into()
}

impl Transform for Reference {
    fn configure(config: Config) -> Result<Self, ConnectError> {
        from_string_map(&config).map_err(|e| ConnectError::fatal(e.to_string()))
    }

    fn transform(&mut self, mut record: Record) -> Result<Vec<Record>, ConnectError> {
        if record.value.is_none() {
            // A tombstone passes through untouched.
            return Ok(vec![record]);
        }
        let mut value = record.value_json().map_err(|e| {
            ConnectError::data(format!(
                "value of {} is not JSON: {e}",
                record.coordinates()
            ))
        })?;
        let Some(object) = value.as_object_mut() else {
            return Err(ConnectError::data("value is JSON but not an object"));
        };
        if object.get(&self.drop_field) == Some(&serde_json::Value::Bool(true)) {
            return Ok(Vec::new());
        }
        if let Some(serde_json::Value::String(s)) = object.get_mut(&self.uppercase_field) {
            *s = s.to_uppercase();
        }
        object.insert(self.add_field.clone(), self.add_value.clone().into());
        record.set_value_json(&value);
        Ok(vec![record])
    }
}

sluice_sdk::export_transform!(Reference);
