//! `JsonConverter` envelopes with `schemas.enable=true`
//! (`runtime/src/schema/`): any bytes are read without a panic (an error
//! for what is not an envelope of its schema); what reads writes, and what
//! is written reads back to the same schema and payload; and a payload as
//! it was read still fits its schema (a transform that changes nothing
//! keeps the schema).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_runtime::config::{DecimalFormat, JsonSchemas};
use sluice_runtime::schema::EnvelopeConverter;
use sluice_runtime::schema::{follow, json};

fuzz_target!(|data: &[u8]| {
    for decimal_format in [DecimalFormat::Base64, DecimalFormat::Numeric] {
        let c = EnvelopeConverter::new(JsonSchemas {
            decimal_format,
            replace_null_with_default: true,
            cache_size: 8,
        });
        let Ok((schema, payload)) = c.read(Some(data)) else {
            continue;
        };
        let written = c
            .write_bytes(schema.as_ref(), payload.as_deref())
            .expect("what was read can be written");
        let again = c.read(written.as_deref()).expect("what was written reads");
        assert_eq!(again, (schema.clone(), payload.clone()));
        if let (Some(s), Some(p)) = (&schema, &payload) {
            let v = json::parse(p).expect("a payload is JSON");
            assert!(
                follow::fits(s, &v, c.settings()),
                "a payload read fits its schema"
            );
        }
    }
});
