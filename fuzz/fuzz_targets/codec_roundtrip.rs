//! The `bytes` world's encoding, from values: every batch, result list,
//! config and status encodes and decodes back to itself.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use sluice_sdk::{ConnectError, ErrorKind, Header, Record, codec};

#[derive(Debug, Arbitrary)]
struct ARecord {
    topic: String,
    partition: i32,
    offset: i64,
    timestamp: Option<i64>,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

impl From<ARecord> for Record {
    fn from(r: ARecord) -> Record {
        Record {
            topic: r.topic,
            partition: r.partition,
            offset: r.offset,
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r
                .headers
                .into_iter()
                .map(|(key, value)| Header { key, value })
                .collect(),
            ..Default::default()
        }
    }
}

#[derive(Debug, Arbitrary)]
enum AKind {
    Data,
    Retriable,
    Fatal,
}

#[derive(Debug, Arbitrary)]
struct AError {
    kind: AKind,
    message: String,
    class: Option<String>,
}

impl From<AError> for ConnectError {
    fn from(e: AError) -> ConnectError {
        let kind = match e.kind {
            AKind::Data => ErrorKind::Data,
            AKind::Retriable => ErrorKind::Retriable,
            AKind::Fatal => ErrorKind::Fatal,
        };
        let error = ConnectError::new(kind, e.message);
        match e.class {
            Some(c) => error.with_class(c),
            None => error,
        }
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    batch: Vec<ARecord>,
    results: Vec<Result<Vec<ARecord>, AError>>,
    config: Vec<(String, String)>,
    status: Result<(), AError>,
}

/// What crosses the boundary of an error: its kind and message (the class
/// does not; a guest's error class is its kind's).
fn same_error(a: &ConnectError, b: &ConnectError) -> bool {
    a.kind == b.kind && a.message == b.message
}

fuzz_target!(|input: Input| {
    let batch: Vec<Record> = input.batch.into_iter().map(Record::from).collect();
    assert_eq!(
        codec::decode_batch(&codec::encode_batch(&batch)).expect("an encoded batch decodes"),
        batch
    );

    let results: Vec<codec::TransformResult> = input
        .results
        .into_iter()
        .map(|r| {
            r.map(|records| records.into_iter().map(Record::from).collect())
                .map_err(ConnectError::from)
        })
        .collect();
    let back =
        codec::decode_results(&codec::encode_results(&results)).expect("encoded results decode");
    assert_eq!(back.len(), results.len());
    for (a, b) in results.iter().zip(&back) {
        match (a, b) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert!(same_error(a, b), "{a:?} came back as {b:?}"),
            _ => panic!("{a:?} came back as {b:?}"),
        }
    }

    assert_eq!(
        codec::decode_config(&codec::encode_config(&input.config))
            .expect("an encoded config decodes"),
        input.config
    );

    let status = input.status.map_err(ConnectError::from);
    let back = codec::decode_status(&codec::encode_status(&status)).expect("a status decodes");
    match (&status, &back) {
        (Ok(()), Ok(())) => {}
        (Err(a), Err(b)) => assert!(same_error(a, b), "{a:?} came back as {b:?}"),
        _ => panic!("{status:?} came back as {back:?}"),
    }
});
