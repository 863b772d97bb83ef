"""Pipeline 2's baseline: Kafka -> transform -> Kafka, exactly-once, the
simple way. A confluent-kafka consumer and a transactional producer; each
transaction holds up to --batch records and the consumed offsets
(send_offsets_to_transaction), as Sluice's stream connector does per
batch. Prints one JSON line with what it measured
(reference_transform.report).

    python pipeline2_python.py --bootstrap HOST:PORT --topic IN --output-topic OUT --records N [--batch 1000]
"""

import argparse
import json
import time

from confluent_kafka import Producer

from reference_transform import cpu_seconds, order_consumer, report, transform


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--output-topic", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--batch", type=int, default=1000)
    args = p.parse_args()

    run = time.time_ns()
    consumer = order_consumer(args.bootstrap, "py-pipeline2")
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": f"py-pipeline2-{run}",
            "linger.ms": 5,
        }
    )
    producer.init_transactions()
    consumer.subscribe([args.topic])
    done = 0
    started = cpu_started = None
    while done < args.records:
        msgs = consumer.consume(num_messages=min(args.batch, args.records - done), timeout=1.0)
        if not msgs:
            continue
        if started is None:
            started, cpu_started = time.perf_counter(), cpu_seconds()
        producer.begin_transaction()
        for msg in msgs:
            if msg.error():
                raise SystemExit(f"consumer error: {msg.error()}")
            producer.produce(args.output_topic, key=msg.key(), value=json.dumps(transform(msg.value())))
            # Serve delivery callbacks so the local queue does not fill.
            producer.poll(0)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata()
        )
        producer.commit_transaction()
        done += len(msgs)
    elapsed = time.perf_counter() - started
    report(done, elapsed, cpu_started)
    consumer.close()


if __name__ == "__main__":
    main()
