//! A connector config as the API and `sluice run` take it: Kafka Connect's
//! JSON (`{"name", "config"}` or flat) to a validated `ConnectorSpec`, its
//! runtime part (`CommonConfig::split`: errors.*, transforms, predicates,
//! converters, overrides) and the herder's whole check (`Validator::validate`:
//! the plugin's own keys, topics, guarantees).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use sluice_runtime::config::{CommonConfig, ConnectorSpec, backoff, redact};

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let spec = match ConnectorSpec::from_json(&json) {
        Ok(spec) => spec,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert_eq!(spec.config.get("name"), Some(&spec.name));
    // What GET /connectors/{name}/config shows, PUT back, is the same connector.
    let again = ConnectorSpec::from_json(&json!({"name": spec.name, "config": spec.config}))
        .expect("a parsed connector parses again");
    assert_eq!(again, spec);
    let shown = redact(&spec.config);
    assert_eq!(shown.len(), spec.config.len());

    if let Ok((common, plugin)) = CommonConfig::split(&spec.config) {
        assert_eq!(common.name, spec.name);
        assert!(
            plugin
                .keys()
                .all(|k| !k.starts_with("transforms.") && !k.starts_with("errors.")),
            "runtime keys handed to the plugin: {plugin:?}"
        );
        for attempt in [0, 1, 15, 16, 17, u32::MAX] {
            assert!(
                backoff(attempt, common.errors.retry_delay_max) <= common.errors.retry_delay_max
            );
        }
        for converter in [common.key_converter, common.value_converter] {
            let _ = converter.check(Some(data));
        }
    }
    sluice_fuzz::validate(&spec);
});
