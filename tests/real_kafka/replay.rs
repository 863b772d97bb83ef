//! DLQ replay on a broker that enforces transactions: two replays of one
//! DLQ at once deliver each dead letter once.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::Message;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sluice_runtime::dlq::{ReplayOptions, replay};

use super::{broker, client_config, clients, create_topic, read_committed, unique};

const LETTERS: usize = 30_000;

/// Dead letters as a sink writes them: the origin topic in the headers.
async fn write_dead_letters(bootstrap: &str, dlq: &str, origin: &str) {
    let producer: FutureProducer = client_config(bootstrap)
        .set("linger.ms", "20")
        .set("acks", "all")
        .create()
        .unwrap();
    let mut sends = Vec::new();
    for i in 0..LETTERS {
        let key = format!("k{i}");
        let value = format!(r#"{{"n": {i}}}"#);
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "x-dead-letter-origin-topic",
                value: Some(origin),
            })
            .insert(Header {
                key: "x-dead-letter-stage",
                value: Some("TASK_PUT"),
            });
        let record = FutureRecord::to(dlq)
            .partition((i % 3) as i32)
            .key(&key)
            .payload(&value)
            .headers(headers);
        sends.push(producer.send_result(record).map_err(|(e, _)| e).unwrap());
    }
    for r in futures::future::join_all(sends).await {
        r.unwrap()
            .map_err(|(e, _)| e)
            .expect("writing a dead letter");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_replays_of_one_dlq_at_once_deliver_each_dead_letter_once() {
    let bootstrap = broker().bootstrap.clone();
    let (dlq, origin) = (unique("replay-dlq"), unique("replay-origin"));
    create_topic(&bootstrap, &dlq, 3).await;
    create_topic(&bootstrap, &origin, 3).await;
    write_dead_letters(&bootstrap, &dlq, &origin).await;

    // The first replay is under way (records reached the origin topic)
    // when an operator starts the same replay again, elsewhere.
    let run = |dlq: String| {
        std::thread::spawn(move || replay(&clients(), &dlq, &ReplayOptions::default()))
    };
    let first = run(dlq.clone());
    let started = std::time::Instant::now();
    while super::high_watermarks(&bootstrap, &origin) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the first replay wrote nothing in 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !first.is_finished(),
        "the first replay ended before the second started: this check needs more than {LETTERS} dead letters"
    );
    let second = run(dlq.clone()).join().unwrap();
    let first = first.join().unwrap();

    // Each dead letter arrived once, with the replay's marks.
    let arrived = read_committed(&bootstrap, &origin);
    let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
    for m in &arrived {
        let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
        *per_key.entry(key).or_default() += 1;
    }
    let repeated: Vec<_> = per_key.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(repeated.is_empty(), "replayed twice: {repeated:?}");
    assert_eq!(per_key.len(), LETTERS, "every dead letter replayed");
    assert_eq!(arrived.len(), LETTERS);

    // The first was told why it stopped; the second finished the work.
    let second = second.expect("the replay started last runs to the end");
    let err = first.expect_err("the replay started first is fenced by the second");
    assert!(format!("{err:#}").contains("took over"), "{err:#}");
    assert!(
        second.replayed > 0 && second.replayed <= LETTERS as u64,
        "{second:?}"
    );

    // Running it again delivers nothing more.
    let again = replay(&clients(), &dlq, &ReplayOptions::default()).unwrap();
    assert_eq!(again.replayed, 0, "{again:?}");
    assert_eq!(read_committed(&bootstrap, &origin).len(), LETTERS);
}
