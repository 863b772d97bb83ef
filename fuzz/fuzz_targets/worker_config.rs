//! A worker config file (JSON of string values, as `sluice run` and
//! `sluice connectors` read it: `WorkerConfig::load`) to a validated
//! `WorkerConfig`, and what is derived from it: the distributed-mode rules,
//! the listener and the worker id, the Kafka clients' settings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_runtime::config::{WorkerConfig, string_map_from_json};
use sluice_runtime::kafka::KafkaClients;

fuzz_target!(|data: &[u8]| {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(map) = string_map_from_json(&json) else {
        return;
    };
    let config = match WorkerConfig::from_map(&map) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    if let Err(e) = config.distributed_topics() {
        let _ = e.to_string();
    }
    let _ = config.listen_addr();
    let _ = config.resolved_worker_id();
    // Builds settings only; nothing is contacted.
    let _ = KafkaClients::new(&config, "127.0.0.1:1".into(), None);
});
