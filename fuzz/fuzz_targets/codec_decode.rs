//! The `bytes` world's encoding (`sluice_sdk::codec`), from untrusted bytes:
//! the host decodes what a guest returns (results, configure status), a
//! guest what the host sends (batch, config). Any buffer is an error or a
//! value, never a panic; and the encoding is canonical: what decodes
//! encodes back to the very same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_sdk::codec;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = codec::decode_batch(data) {
        assert_eq!(codec::encode_batch(&batch), data, "batch re-encodes");
    }
    if let Ok(results) = codec::decode_results(data) {
        assert_eq!(codec::encode_results(&results), data, "results re-encode");
    }
    if let Ok(config) = codec::decode_config(data) {
        assert_eq!(codec::encode_config(&config), data, "config re-encodes");
    }
    if let Ok(status) = codec::decode_status(data) {
        assert_eq!(codec::encode_status(&status), data, "status re-encodes");
    }
});
