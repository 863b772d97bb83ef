//! A library that claims a plugin ABI this runtime does not speak.

#[unsafe(no_mangle)]
pub extern "C" fn sluice_plugin_abi_version() -> u32 {
    999
}
