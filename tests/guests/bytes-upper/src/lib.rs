//! The bytes world, as a language without a binding generator would use
//! it: one encoded buffer in, one out (encoding: `sdk/wit/README.md`).
//! Uppercases ASCII values and tags them with a header; a value `bad` is a
//! data error.

use sluice_sdk::codec;
use sluice_sdk::{ConnectError, Record};

wit_bindgen::generate!({
    path: "../../../sdk/wit",
    world: "bytes",
});

struct Upper;

fn apply(mut r: Record) -> Result<Vec<Record>, ConnectError> {
    if r.value.as_deref() == Some(b"bad") {
        return Err(ConnectError::data("bytes-upper: `bad` is not allowed"));
    }
    if let Some(v) = &mut r.value {
        v.make_ascii_uppercase();
    }
    r.add_header("x-bytes-world", None);
    Ok(vec![r])
}

impl Guest for Upper {
    fn configure(config: Vec<u8>) -> Vec<u8> {
        let status = match codec::decode_config(&config) {
            Ok(pairs) if pairs.is_empty() => Ok(()),
            Ok(pairs) => Err(ConnectError::fatal(format!("unknown key `{}`", pairs[0].0))),
            Err(e) => Err(ConnectError::fatal(e.to_string())),
        };
        codec::encode_status(&status)
    }

    fn transform_batch(input: Vec<u8>) -> Vec<u8> {
        let results: Vec<_> = match codec::decode_batch(&input) {
            Ok(records) => records.into_iter().map(apply).collect(),
            Err(e) => vec![Err(ConnectError::fatal(e.to_string()))],
        };
        codec::encode_results(&results)
    }
}

export!(Upper);
