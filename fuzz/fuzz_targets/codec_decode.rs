//! The `bytes` world's encoding (`sluice_sdk::codec`), from untrusted bytes:
//! the host decodes what a guest returns (results, configure status), a
//! guest what the host sends (batch, config). Any buffer is an error or a
//! value, never a panic; and the encoding is canonical: what decodes
//! encodes back to the very same bytes. Decoding results for their inputs
//! gives the same results, and leaves the inputs whole when it fails (the
//! host replays them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_sdk::{Header, Record, codec};

/// Inputs whose fields a results buffer may repeat: the same shape as the
/// host's (a topic, a key, a value, a header).
fn inputs() -> Vec<Record> {
    (0..4)
        .map(|i| Record {
            topic: "t".into(),
            partition: i,
            offset: 1,
            key: Some(vec![b'k'; i as usize]),
            value: (i % 2 == 0).then(|| b"v".to_vec()),
            headers: vec![Header {
                key: "h".into(),
                value: None,
            }],
            ..Default::default()
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = codec::decode_batch(data) {
        assert_eq!(codec::encode_batch(&batch), data, "batch re-encodes");
    }
    let plain = codec::decode_results(data);
    if let Ok(results) = &plain {
        assert_eq!(codec::encode_results(results), data, "results re-encode");
    }
    let mut reused = inputs();
    match (codec::decode_results_for(data, &mut reused), plain) {
        (Ok(a), Ok(b)) => assert_eq!(
            codec::encode_results(&a),
            codec::encode_results(&b),
            "reusing the inputs' fields changes nothing"
        ),
        (Err(_), Err(_)) => assert_eq!(reused, inputs(), "a failed decode left the inputs whole"),
        (a, b) => panic!("decoding with inputs gave {a:?}, without {b:?}"),
    }
    if let Ok(config) = codec::decode_config(data) {
        assert_eq!(codec::encode_config(&config), data, "config re-encodes");
    }
    if let Ok(status) = codec::decode_status(data) {
        assert_eq!(codec::encode_status(&status), data, "status re-encodes");
    }
});
