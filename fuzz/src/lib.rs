//! What the fuzz targets share: the validator the REST handlers and the
//! herder use, built once, and a runtime to drive its async checks.

use std::future::Future;
use std::sync::OnceLock;

use sluice_runtime::config::{CommonConfig, ConnectorSpec};
use sluice_runtime::metrics::Metrics;
use sluice_runtime::plugin::Registry;
use sluice_runtime::transform::wasm::WasmHost;
use sluice_runtime::validate::Validator;

/// The built-in plugins, no config providers, no transforms library and no
/// WASM cache: nothing on disk is read or written.
pub fn validator() -> &'static Validator {
    static V: OnceLock<Validator> = OnceLock::new();
    V.get_or_init(|| {
        let metrics = Metrics::new();
        let wasm = WasmHost::new(None, metrics.wasm_compilations.clone()).expect("a WASM engine");
        Validator::new(Registry::builtin(), wasm, Default::default(), None)
    })
}

pub fn block_on<F: Future>(f: F) -> F::Output {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
    .block_on(f)
}

/// Every check of a create or config update short of running, as the herder
/// makes it (`Validator::validate`). Skipped for a config with transforms:
/// validating those loads WASM modules from the paths it names, which a
/// fuzzer must not choose.
pub fn validate(spec: &ConnectorSpec) {
    let loads_modules =
        CommonConfig::split(&spec.config).is_ok_and(|(common, _)| !common.transforms.is_empty());
    if loads_modules {
        return;
    }
    if let Err(e) = block_on(validator().validate(spec)) {
        let _ = e.to_string();
    }
}
