//! The WASM transform host with real components built from source: the
//! record contract, chains with predicates, the sandbox and its limits, the
//! bytes world, the compiled-code cache and per-transform metrics.

use std::path::Path;

use sluice_runtime::config::CommonConfig;
use sluice_runtime::metrics::Metrics;
use sluice_runtime::transform::wasm::WasmHost;
use sluice_runtime::transform::{CompiledChain, TransformChain, TransformFailure};
use sluice_sdk::{ConfigMap, ErrorKind, Header, Record};

use crate::fixtures;

fn host() -> (WasmHost, Metrics) {
    let metrics = Metrics::new();
    (
        WasmHost::new(
            Some(fixtures::wasm_cache_dir()),
            metrics.wasm_compilations.clone(),
        )
        .unwrap(),
        metrics,
    )
}

/// A connector config with these transform keys, through the real parser.
fn config(pairs: &[(&str, String)]) -> ConfigMap {
    let mut c: ConfigMap = [("name", "t"), ("connector.class", "datagen")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for (k, v) in pairs {
        c.insert(k.to_string(), v.clone());
    }
    c
}

fn compile(host: &WasmHost, pairs: &[(&str, String)]) -> Result<CompiledChain, (String, String)> {
    let (common, _) = CommonConfig::split(&config(pairs)).expect("valid config");
    CompiledChain::compile(host, &common.transforms)
}

fn chain(host: &WasmHost, metrics: &Metrics, pairs: &[(&str, String)]) -> TransformChain {
    compile(host, pairs)
        .expect("modules load")
        .instantiate(metrics, "t", 0)
        .expect("instances start")
}

fn chaos(extra: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    let mut pairs = vec![
        ("transforms", "c".to_string()),
        ("transforms.c.type", "wasm".to_string()),
        (
            "transforms.c.module",
            fixtures::test_guest("chaos").display().to_string(),
        ),
    ];
    for (k, v) in extra {
        pairs.push((
            Box::leak(format!("transforms.c.{k}").into_boxed_str()),
            v.to_string(),
        ));
    }
    pairs
}

fn rec(value: &str) -> Record {
    Record {
        topic: "orders".into(),
        partition: 0,
        offset: 7,
        timestamp: Some(1),
        key: Some(b"k".to_vec()),
        value: Some(value.as_bytes().to_vec()),
        headers: vec![],
        ..Default::default()
    }
}

fn values(out: &Result<Vec<Record>, TransformFailure>) -> Vec<String> {
    out.as_ref()
        .expect("transformed")
        .iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

fn failure(out: &Result<Vec<Record>, TransformFailure>) -> (&str, ErrorKind, String) {
    let f = out.as_ref().expect_err("failed");
    (f.transform.as_str(), f.error.kind, f.error.full_message())
}

/// The error class of a failed record (`TransformTimeout`, ...).
fn failure_class(out: &Result<Vec<Record>, TransformFailure>) -> String {
    let f = out.as_ref().expect_err("failed");
    f.error.class_name().to_string()
}

#[test]
fn map_drop_flat_map_and_every_error_class() {
    let (host, metrics) = host();
    let mut c = chain(&host, &metrics, &chaos(&[("tag", "+t")]));
    let out = c.apply(vec![
        rec("a"),
        rec("drop"),
        rec("flatmap:3"),
        rec("error:data"),
        rec("error:retriable"),
        rec("error:fatal"),
    ]);
    assert_eq!(values(&out[0]), vec!["a+t"]);
    assert!(values(&out[1]).is_empty());
    let copies = out[2].as_ref().unwrap();
    assert_eq!(copies.len(), 3);
    let headers: Vec<&Header> = copies.iter().map(|r| &r.headers[0]).collect();
    assert_eq!(
        headers
            .iter()
            .map(|h| h.value.clone().unwrap())
            .collect::<Vec<_>>(),
        vec![b"0".to_vec(), b"1".to_vec(), b"2".to_vec()]
    );
    assert_eq!(copies[1].offset, 7, "record fields survive the boundary");
    assert_eq!(failure(&out[3]).1, ErrorKind::Data);
    assert_eq!(failure(&out[4]).1, ErrorKind::Retriable);
    assert_eq!(failure(&out[5]).1, ErrorKind::Fatal);
    assert_eq!(failure(&out[5]).0, "c");

    let render = metrics.render();
    for series in [
        r#"sluice_transform_calls_total{connector="t",task="0",transform="c"} 1"#,
        r#"sluice_transform_records_total{connector="t",direction="in",task="0",transform="c"} 6"#,
        r#"sluice_transform_records_total{connector="t",direction="out",task="0",transform="c"} 4"#,
        r#"sluice_transform_errors_total{class="data",connector="t",task="0",transform="c"} 1"#,
        r#"sluice_transform_errors_total{class="retriable",connector="t",task="0",transform="c"} 1"#,
        r#"sluice_transform_errors_total{class="fatal",connector="t",task="0",transform="c"} 1"#,
        r#"sluice_transform_call_seconds_count{connector="t",task="0",transform="c"} 1"#,
    ] {
        assert!(render.contains(series), "missing `{series}`:\n{render}");
    }
}

#[test]
fn headers_keep_null_values_order_and_duplicates() {
    let (host, metrics) = host();
    let mut c = chain(&host, &metrics, &chaos(&[]));
    let mut r = rec("x");
    r.headers = vec![
        Header {
            key: "h".into(),
            value: None,
        },
        Header {
            key: "h".into(),
            value: Some(b"2".to_vec()),
        },
        Header {
            key: "a".into(),
            value: Some(vec![]),
        },
    ];
    let out = c.apply(vec![r.clone()]);
    assert_eq!(out[0].as_ref().unwrap()[0].headers, r.headers);
}

#[test]
fn a_chain_of_three_with_predicates_and_negate() {
    let (host, metrics) = host();
    let module = fixtures::test_guest("chaos").display().to_string();
    let mut pairs = vec![
        ("transforms", "a,b,c".to_string()),
        ("predicates", "isOrders,hasSkip".to_string()),
        ("predicates.isOrders.type", "TopicNameMatches".to_string()),
        ("predicates.isOrders.pattern", "orders|payments".to_string()),
        (
            "predicates.hasSkip.type",
            "org.apache.kafka.connect.transforms.predicates.HasHeaderKey".to_string(),
        ),
        ("predicates.hasSkip.name", "skip".to_string()),
        // a: only orders/payments topics; b: all but records with a `skip`
        // header; c: every record.
        ("transforms.a.predicate", "isOrders".to_string()),
        ("transforms.b.predicate", "hasSkip".to_string()),
        ("transforms.b.negate", "true".to_string()),
    ];
    for (alias, tag) in [("a", "A"), ("b", "B"), ("c", "C")] {
        pairs.push((
            Box::leak(format!("transforms.{alias}.type").into_boxed_str()),
            "wasm".into(),
        ));
        pairs.push((
            Box::leak(format!("transforms.{alias}.module").into_boxed_str()),
            module.clone(),
        ));
        pairs.push((
            Box::leak(format!("transforms.{alias}.tag").into_boxed_str()),
            tag.into(),
        ));
    }
    let mut c = chain(&host, &metrics, &pairs);
    let mut skipped = rec("s");
    skipped.add_header("skip", None);
    let mut other_topic = rec("o");
    other_topic.topic = "orders-eu".into(); // not a whole-name match
    let out = c.apply(vec![
        rec("x"),
        skipped,
        other_topic,
        rec("drop"),
        rec("flatmap:2"),
    ]);
    assert_eq!(values(&out[0]), vec!["xABC"]);
    assert_eq!(values(&out[1]), vec!["sAC"]);
    assert_eq!(values(&out[2]), vec!["oBC"]);
    assert!(values(&out[3]).is_empty(), "dropped by the first stage");
    // Each of the three stages flat-maps `flatmap:2` again: 2 x 2 x 2.
    assert_eq!(
        values(&out[4]).len(),
        8,
        "every copy goes on through the chain"
    );
}

#[test]
fn a_trap_fails_only_its_record_and_a_fresh_instance_carries_on() {
    let (host, metrics) = host();
    let mut c = chain(&host, &metrics, &chaos(&[("tag", "!")]));
    let out = c.apply(vec![rec("a"), rec("trap"), rec("b")]);
    assert_eq!(values(&out[0]), vec!["a!"]);
    let (_, kind, message) = failure(&out[1]);
    assert_eq!(kind, ErrorKind::Data);
    // The panic message itself goes to the guest's stderr, i.e. the log.
    assert!(message.contains("transform `c` trapped"), "{message}");
    assert_eq!(values(&out[2]), vec!["b!"]);
    let out = c.apply(vec![rec("c")]);
    assert_eq!(values(&out[0]), vec!["c!"], "healthy after the trap");
    let render = metrics.render();
    assert!(
        render.contains(
            r#"sluice_wasm_instance_restarts_total{connector="t",task="0",transform="c"} 2"#
        ),
        "{render}"
    );
}

#[test]
fn an_infinite_loop_is_stopped_by_the_time_limit() {
    let (host, metrics) = host();
    let mut c = chain(&host, &metrics, &chaos(&[("limits.timeout.ms", "200")]));
    let started = std::time::Instant::now();
    let out = c.apply(vec![rec("loop"), rec("ok")]);
    let (_, kind, message) = failure(&out[0]);
    assert_eq!(kind, ErrorKind::Data);
    assert!(
        message.contains("exceeded its time limit of 200 ms"),
        "{message}"
    );
    assert_eq!(values(&out[1]), vec!["ok"]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the loop was not stopped"
    );
    assert_eq!(values(&c.apply(vec![rec("again")])[0]), vec!["again"]);
}

#[test]
fn a_memory_bomb_hits_the_memory_limit() {
    let (host, metrics) = host();
    let limit = 48 * 1024 * 1024;
    let mut c = chain(
        &host,
        &metrics,
        &chaos(&[("limits.memory.bytes", &limit.to_string())]),
    );
    let out = c.apply(vec![rec("bomb"), rec("fine")]);
    let (_, kind, message) = failure(&out[0]);
    assert_eq!(kind, ErrorKind::Data);
    assert!(
        message.contains(&format!("exceeded its memory limit of {limit} bytes")),
        "{message}"
    );
    assert_eq!(values(&out[1]), vec!["fine"]);
}

/// A guest blocked in the host (a WASI sleep) is out of the epoch
/// deadline's reach: its wait is cut at the deadline, and the call fails
/// as a timeout rather than holding the task for the whole sleep.
#[test]
fn a_sleep_is_stopped_by_the_time_limit() {
    let (host, metrics) = host();
    let mut c = chain(&host, &metrics, &chaos(&[("limits.timeout.ms", "300")]));
    // An hour's sleep: the call must come back long before, or the task
    // is held for as long as the guest likes.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let out = c.apply(vec![rec("sleep:3600000"), rec("ok")]);
        let _ = done.send((c, out));
    });
    let (mut c, out) = finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the sleeping guest was not stopped by limits.timeout.ms");
    let (_, kind, message) = failure(&out[0]);
    assert_eq!(kind, ErrorKind::Data);
    assert!(
        message.contains("exceeded its time limit of 300 ms"),
        "{message}"
    );
    assert_eq!(values(&out[1]), vec!["ok"]);
    // A short sleep within the limit is fine.
    assert_eq!(values(&c.apply(vec![rec("sleep:10")])[0]), vec!["sleep:10"]);
}

/// The hostile components of tests/guests/hostile, as a one-transform chain.
fn hostile(name: &str, extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut pairs = vec![
        ("transforms", "h".to_string()),
        ("transforms.h.type", "wasm".to_string()),
        (
            "transforms.h.module",
            fixtures::build_hostile(name).display().to_string(),
        ),
    ];
    pairs.extend(extra.iter().cloned());
    pairs
}

/// Nine memories of 1 MiB, each under a 4 MiB limit: the limit is on all
/// of an instance's memories together.
#[test]
fn many_memories_share_one_memory_limit() {
    let (host, metrics) = host();
    let limit = 4 * 1024 * 1024;
    let mut c = chain(
        &host,
        &metrics,
        &hostile(
            "many_memories",
            &[("transforms.h.limits.memory.bytes", limit.to_string())],
        ),
    );
    let out = c.apply(vec![rec("x")]);
    let (_, kind, message) = failure(&out[0]);
    assert_eq!(kind, ErrorKind::Data);
    assert_eq!(failure_class(&out[0]), "TransformMemoryLimit", "{message}");
    assert!(
        message.contains(&format!("exceeded its memory limit of {limit} bytes")),
        "{message}"
    );
}

/// Table elements are host memory outside any linear memory: bounded.
#[test]
fn table_growth_is_bounded() {
    let (host, metrics) = host();
    let mut c = chain(&host, &metrics, &hostile("table_growth", &[]));
    let out = c.apply(vec![rec("x")]);
    let (_, kind, message) = failure(&out[0]);
    assert_eq!(kind, ErrorKind::Data);
    assert_eq!(failure_class(&out[0]), "TransformTableLimit", "{message}");
    assert!(message.contains("tables would hold"), "{message}");
}

#[test]
fn no_files_no_environment_but_clocks_work() {
    let (host, metrics) = host();
    let mut c = chain(&host, &metrics, &chaos(&[]));
    let secret = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(secret.path(), "secret").unwrap();
    let out = c.apply(vec![
        rec(&format!("read:{}", secret.path().display())),
        rec("env"),
        rec("clock"),
    ]);
    let (_, kind, message) = failure(&out[0]);
    assert_eq!(
        kind,
        ErrorKind::Data,
        "the read is denied at call time, as a data error: {message}"
    );
    assert!(message.contains("reading"), "{message}");
    assert_eq!(values(&out[1]), vec!["0"], "no environment variables");
    let now: u128 = values(&out[2])[0].parse().unwrap();
    assert!(now > 1_700_000_000_000, "wall clock works: {now}");
}

#[test]
fn a_component_importing_the_network_is_rejected_naming_the_import() {
    let (host, _) = host();
    let pairs = vec![
        ("transforms", "n".to_string()),
        ("transforms.n.type", "wasm".to_string()),
        (
            "transforms.n.module",
            fixtures::test_guest("net").display().to_string(),
        ),
    ];
    let Err((key, message)) = compile(&host, &pairs) else {
        panic!("a networking component was accepted")
    };
    assert_eq!(key, "transforms.n.module");
    assert!(message.contains("imports `wasi:sockets/"), "{message}");
    assert!(message.contains("without network access"), "{message}");
}

#[test]
fn oversized_and_non_transform_modules_are_rejected() {
    let (host, _) = host();
    let mut pairs = chaos(&[("limits.module.bytes", "1000")]);
    let Err((_, message)) = compile(&host, &pairs) else {
        panic!("accepted")
    };
    assert!(
        message.contains("over the limit of 1000 (limits.module.bytes)"),
        "{message}"
    );
    // A valid component that exports neither world.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.wasm");
    std::fs::write(&empty, wat_component()).unwrap();
    pairs = vec![
        ("transforms", "e".to_string()),
        ("transforms.e.type", "wasm".to_string()),
        ("transforms.e.module", empty.display().to_string()),
    ];
    let Err((_, message)) = compile(&host, &pairs) else {
        panic!("accepted")
    };
    assert!(
        message.contains("exports neither `sluice:transform/transformer@0.1.0`"),
        "{message}"
    );
}

/// The smallest component: the preamble of an empty component binary.
fn wat_component() -> Vec<u8> {
    vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
}

#[test]
fn the_bytes_world_works_like_the_records_world() {
    let (host, metrics) = host();
    let pairs = vec![
        ("transforms", "u".to_string()),
        ("transforms.u.type", "wasm".to_string()),
        (
            "transforms.u.module",
            fixtures::test_guest("bytes-upper").display().to_string(),
        ),
    ];
    let mut c = chain(&host, &metrics, &pairs);
    let out = c.apply(vec![rec("hello"), rec("bad"), rec("x")]);
    assert_eq!(values(&out[0]), vec!["HELLO"]);
    let r = &out[0].as_ref().unwrap()[0];
    assert_eq!(
        r.headers,
        vec![Header {
            key: "x-bytes-world".into(),
            value: None
        }]
    );
    assert_eq!(
        (r.topic.as_str(), r.offset, r.key.as_deref()),
        ("orders", 7, Some(&b"k"[..]))
    );
    let (_, kind, message) = failure(&out[1]);
    assert_eq!(
        (kind, message.as_str()),
        (ErrorKind::Data, "bytes-upper: `bad` is not allowed")
    );
    assert_eq!(values(&out[2]), vec!["X"]);

    // Its configure is checked too.
    let mut bad = pairs.clone();
    bad.push(("transforms.u.colour", "red".to_string()));
    let Err(e) = compile(&host, &bad).unwrap().instantiate(&metrics, "t", 0) else {
        panic!("bad config accepted")
    };
    assert!(
        e.message
            .contains("rejected its config: unknown key `colour`"),
        "{}",
        e.message
    );
}

#[test]
fn guest_output_goes_to_the_log() {
    use std::sync::{Arc, Mutex};
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let (host, metrics) = host();
    tracing::subscriber::with_default(subscriber, || {
        let mut c = chain(&host, &metrics, &chaos(&[]));
        let out = c.apply(vec![rec("print:hello from the guest")]);
        assert!(out[0].is_ok());
        drop(c);
    });
    let log = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    assert!(
        log.contains("hello from the guest") && log.contains("stream=\"stdout\""),
        "{log}"
    );
    assert!(
        log.contains("hello from the guest (stderr)") && log.contains("stream=\"stderr\""),
        "{log}"
    );
    assert!(log.contains("transform=c"), "{log}");
}

#[test]
fn compiled_code_is_cached_on_disk_and_not_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let module = fixtures::example_component();
    let load = |dir: &Path| {
        let metrics = Metrics::new();
        let host =
            WasmHost::new(Some(dir.to_path_buf()), metrics.wasm_compilations.clone()).unwrap();
        let pairs = vec![
            ("transforms", "e".to_string()),
            ("transforms.e.type", "wasm".to_string()),
            ("transforms.e.module", module.display().to_string()),
        ];
        let mut c = chain(&host, &metrics, &pairs);
        let out = c.apply(vec![rec(r#"{"status": "new"}"#)]);
        assert_eq!(
            values(&out[0]),
            vec![r#"{"status":"NEW","processed_by":"sluice"}"#]
        );
        let stats = host.stats();
        (
            stats.compiled.load(std::sync::atomic::Ordering::Relaxed),
            stats.cache_hits.load(std::sync::atomic::Ordering::Relaxed),
            metrics.render(),
        )
    };
    let (compiled, hits, _) = load(cache.path());
    assert_eq!((compiled, hits), (1, 0), "first start compiles");
    let (compiled, hits, render) = load(cache.path());
    assert_eq!(
        (compiled, hits),
        (0, 1),
        "second start loads the cached code"
    );
    assert!(
        render.contains(r#"sluice_wasm_compilations_total{outcome="cache_hit"} 1"#),
        "{render}"
    );
}
