//! Dead-letter headers as `sluice dlq inspect` and `replay` read them: each
//! consumed header decoded from librdkafka's raw key and value
//! (`kafka::decode_header`: a key that is not UTF-8 is kept, made valid, and
//! reported), the dead-letter context read from them (`dlq::DeadLetter`), and
//! the record a replay sends back (`dlq::replayed_record`): its original
//! headers in order, then the replay's name and a count one higher.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rdkafka::message::Headers;
use sluice_runtime::dlq::{
    DeadLetter, REPLAY_COUNT_HEADER, REPLAY_HEADER, ReplayOptions, replay_group, replayed_record,
};
use sluice_runtime::errors::Stage;
use sluice_runtime::kafka::decode_header;

#[derive(Debug, Arbitrary)]
struct Input {
    partition: i32,
    offset: i64,
    timestamp: Option<i64>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// Raw keys and values, as librdkafka hands them over.
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    target: String,
    dlq_topic: String,
    error_class: Option<String>,
}

/// librdkafka keeps a header key as a C string: it ends at its first NUL.
fn c_key(k: &str) -> &str {
    k.split('\0').next().unwrap_or_default()
}

fuzz_target!(|input: Input| {
    let mut headers = Vec::new();
    for (idx, (key, value)) in input.headers.iter().enumerate() {
        let (header, problem) = decode_header(idx, key, value.as_deref());
        match std::str::from_utf8(key) {
            Ok(k) => {
                assert_eq!(header.key, k);
                assert!(problem.is_none());
            }
            Err(_) => {
                assert_eq!(header.key, String::from_utf8_lossy(key));
                let p = problem.expect("a key that is not UTF-8 is reported");
                assert_eq!(p.class_name(), "InvalidHeaderKey");
            }
        }
        assert_eq!(header.value.as_deref(), value.as_deref());
        headers.push((header.key, header.value));
    }
    let letter = DeadLetter {
        partition: input.partition,
        offset: input.offset,
        key: input.key,
        value: input.value,
        timestamp: input.timestamp,
        headers,
    };
    let origin = letter.origin_topic();
    assert!(origin.as_deref() != Some(""));
    let stage = letter.stage();
    let class = letter.error_class();
    let count = letter.replay_count();
    let originals: Vec<_> = letter.original_headers().cloned().collect();
    for (k, _) in &originals {
        assert!(
            !k.starts_with("x-dead-letter-")
                && !k.starts_with("__connect.errors.")
                && k != REPLAY_HEADER
                && k != REPLAY_COUNT_HEADER,
            "context header `{k}` kept as an original"
        );
    }

    let opts = ReplayOptions {
        error_class: input.error_class.or(Some(class)),
        stage: Some(stage.clone()),
        ..Default::default()
    };
    let group = replay_group(&input.dlq_topic, &opts);
    if let Some(st) = Stage::parse(&stage) {
        // The stage in any spelling is the same replay.
        let canonical = ReplayOptions {
            stage: Some(st.as_str().to_ascii_lowercase()),
            ..opts.clone()
        };
        assert_eq!(replay_group(&input.dlq_topic, &canonical), group);
    }

    let record = replayed_record(&letter, &input.target, &group);
    assert_eq!(record.topic, input.target);
    assert_eq!(record.key, letter.key.as_deref());
    assert_eq!(record.payload, letter.value.as_deref());
    assert_eq!(record.timestamp, letter.timestamp);
    let sent = record
        .headers
        .as_ref()
        .expect("a replayed record has headers");
    let sent: Vec<(String, Option<Vec<u8>>)> = sent
        .iter()
        .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(sent.len(), originals.len() + 2);
    for ((k, v), (sk, sv)) in originals.iter().zip(&sent) {
        assert_eq!(c_key(k), sk);
        assert_eq!(v, sv);
    }
    let marks = &sent[originals.len()..];
    assert_eq!(marks[0].0, REPLAY_HEADER);
    assert_eq!(marks[0].1.as_deref(), Some(group.as_bytes()));
    assert_eq!(marks[1].0, REPLAY_COUNT_HEADER);

    // Dead-lettered again, the replayed record reads as replayed once more.
    let again = DeadLetter {
        headers: sent,
        ..letter.clone()
    };
    assert_eq!(again.replay_count(), count + 1);
});
