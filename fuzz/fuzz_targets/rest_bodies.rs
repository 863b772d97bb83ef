//! The REST API's request bodies, through the functions its handlers use.
//! The router itself is not driven: a create or config update that passes
//! validation starts real tasks (a file sink writes where its config says),
//! which a fuzzer must not do.
//!
//! Input: one selector byte, a path parameter (connector name, logger or
//! plugin class) up to the first newline, then the JSON body.
//! - `c` POST /connectors: `initial_state`, then the connector JSON
//! - `p` PUT /connectors/{name}/config
//! - `a` PATCH /connectors/{name}/config, over a datagen connector's config
//! - `o` PATCH /connectors/{name}/offsets, as a source's and as a sink's
//!   (topics `orders` and the path parameter)
//! - `l` PUT /admin/loggers/{logger}
//! - `r` POST /connectors/{name}/dlq/replay
//! - `v` PUT /connector-plugins/{class}/config/validate
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use sluice_runtime::config::ConnectorSpec;
use sluice_runtime::dlq::{ReplayOptions, replay_group};
use sluice_runtime::herder::{sink_offset_changes, source_offset_changes};
use sluice_runtime::worker::TargetState;

fn connector(spec: Result<ConnectorSpec, impl ToString>) {
    match spec {
        Ok(spec) => sluice_fuzz::validate(&spec),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

fn offsets(name: &str, body: &Value) {
    let Some(entries) = body.get("offsets").and_then(Value::as_array).cloned() else {
        return;
    };
    if let Ok(changes) = source_offset_changes(entries.clone()) {
        assert_eq!(changes.len(), entries.len());
        for (e, (key, _)) in entries.iter().zip(&changes) {
            // The key is canonical: the same partition, its fields in
            // another order, is the same key.
            let reversed: serde_json::Map<String, Value> = e["partition"]
                .as_object()
                .expect("a partition object")
                .iter()
                .rev()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(
                &sluice_sdk::source_partition_key(&Value::Object(reversed)),
                key
            );
        }
    }
    let topics = ["orders".to_string(), name.to_string()];
    if let Ok(changes) = sink_offset_changes(entries.clone(), &topics) {
        assert_eq!(changes.len(), entries.len());
        for (e, (topic, partition, offset)) in entries.iter().zip(&changes) {
            assert!(topics.contains(topic));
            assert_eq!(
                e["partition"]["kafka_partition"].as_i64(),
                Some(i64::from(*partition)),
                "partition {} changed as {partition}",
                e["partition"]["kafka_partition"]
            );
            assert!(offset.is_none_or(|o| o >= 0));
        }
    }
}

fn logger(name: &str, body: &Value) {
    let Some(level) = body.get("level").and_then(Value::as_str) else {
        return;
    };
    // Logging is not initialised here: what is checked is the request.
    let Err(e) = sluice_runtime::logging::set_level(name, level) else {
        return;
    };
    if e == "logging is not initialised" && name != "root" {
        // Accepted: the worker then rebuilds its filter with this logger;
        // a directive that does not parse would silently reset every level.
        let spec = format!("info,{name}={}", level.to_ascii_lowercase());
        assert!(
            tracing_subscriber::EnvFilter::try_new(&spec).is_ok(),
            "logger `{name}` accepted, but `{spec}` is not a valid filter"
        );
    }
}

fn replay(name: &str, body: Value) {
    let Ok(opts) = serde_json::from_value::<ReplayOptions>(body) else {
        return;
    };
    let _ = replay_group(name, &opts);
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let (param, body) = match rest.iter().position(|b| *b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(param) = std::str::from_utf8(param) else {
        return;
    };
    // What axum's `Json` extractor accepts.
    let Ok(mut body) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    match which {
        b'c' => {
            let initial = body
                .as_object_mut()
                .and_then(|o| o.remove("initial_state"))
                .unwrap_or(Value::Null);
            if let Value::String(s) = &initial {
                let _ = TargetState::parse(s);
            }
            connector(ConnectorSpec::from_json(&body));
        }
        b'p' => connector(ConnectorSpec::from_json(
            &json!({"name": param, "config": body}),
        )),
        b'a' => {
            let Some(patch) = body.as_object() else {
                return;
            };
            let mut merged = serde_json::Map::new();
            for (k, v) in [
                ("connector.class", "datagen"),
                ("name", param),
                ("topic", "orders"),
                ("tasks.max", "1"),
            ] {
                merged.insert(k.into(), Value::String(v.into()));
            }
            for (k, v) in patch {
                if v.is_null() {
                    merged.remove(k);
                } else {
                    merged.insert(k.clone(), v.clone());
                }
            }
            connector(ConnectorSpec::from_json(
                &json!({"name": param, "config": merged}),
            ));
        }
        b'o' => offsets(param, &body),
        b'l' => logger(param, &body),
        b'r' => replay(param, body),
        b'v' => {
            let names_transforms = body
                .as_object()
                .is_some_and(|o| o.keys().any(|k| k.starts_with("transforms")));
            if !names_transforms {
                let _ = sluice_fuzz::block_on(sluice_fuzz::validator().report(param, &body));
            }
        }
        _ => {}
    }
});
