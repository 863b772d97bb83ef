//! The reference transform, in Rust: parses the JSON value, uppercases one
//! field, adds a field, drops records flagged for dropping, and rejects a
//! value that is not JSON with a `data` error.
//!
//! Config (`transforms.<name>.<key>`):
//! - `uppercase.field` (default `status`): string field to uppercase.
//! - `add.field` / `add.value` (default `processed_by` / `sluice`): field to add.
//! - `drop.field` (default `drop`): records whose value has this field set to
//!   `true` are dropped.

use std::cell::RefCell;

use exports::sluice::transform::transformer::Guest;
use sluice::transform::types::{ErrorClass, KafkaRecord, TransformError};

wit_bindgen::generate!({
    path: "../../../sdk/wit",
    world: "transform",
});

struct Settings {
    uppercase_field: String,
    add_field: String,
    add_value: String,
    drop_field: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            uppercase_field: "status".into(),
            add_field: "processed_by".into(),
            add_value: "sluice".into(),
            drop_field: "drop".into(),
        }
    }
}

thread_local! {
    static SETTINGS: RefCell<Settings> = RefCell::new(Settings::default());
}

struct Component;

fn data_error(message: String) -> TransformError {
    TransformError {
        class: ErrorClass::Data,
        message,
    }
}

fn apply(settings: &Settings, mut record: KafkaRecord) -> Result<Vec<KafkaRecord>, TransformError> {
    let Some(bytes) = record.value.as_deref() else {
        // A tombstone passes through untouched.
        return Ok(vec![record]);
    };
    let mut value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        data_error(format!(
            "value of {}-{}@{} is not JSON: {e}",
            record.topic, record.partition, record.offset
        ))
    })?;
    let Some(object) = value.as_object_mut() else {
        return Err(data_error("value is JSON but not an object".into()));
    };
    if object.get(&settings.drop_field) == Some(&serde_json::Value::Bool(true)) {
        return Ok(Vec::new());
    }
    if let Some(serde_json::Value::String(s)) = object.get_mut(&settings.uppercase_field) {
        *s = s.to_uppercase();
    }
    object.insert(
        settings.add_field.clone(),
        serde_json::Value::String(settings.add_value.clone()),
    );
    record.value = Some(serde_json::to_vec(&value).expect("a JSON value serialises"));
    Ok(vec![record])
}

impl Guest for Component {
    fn configure(config: Vec<(String, String)>) -> Result<(), TransformError> {
        let mut settings = Settings::default();
        for (key, value) in config {
            match key.as_str() {
                "uppercase.field" => settings.uppercase_field = value,
                "add.field" => settings.add_field = value,
                "add.value" => settings.add_value = value,
                "drop.field" => settings.drop_field = value,
                other => {
                    return Err(TransformError {
                        class: ErrorClass::Fatal,
                        message: format!(
                            "unknown config key `{other}`; supported: uppercase.field, add.field, add.value, drop.field"
                        ),
                    });
                }
            }
        }
        SETTINGS.with(|s| *s.borrow_mut() = settings);
        Ok(())
    }

    fn transform(input: KafkaRecord) -> Result<Vec<KafkaRecord>, TransformError> {
        SETTINGS.with(|s| apply(&s.borrow(), input))
    }

    fn transform_batch(input: Vec<KafkaRecord>) -> Vec<Result<Vec<KafkaRecord>, TransformError>> {
        SETTINGS.with(|s| {
            let settings = s.borrow();
            input.into_iter().map(|r| apply(&settings, r)).collect()
        })
    }
}

export!(Component);
