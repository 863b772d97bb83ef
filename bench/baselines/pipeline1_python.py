"""Pipeline 1's baseline: Kafka -> transform -> PostgreSQL upsert, the
simple way. A confluent-kafka consumer, the reference transform in Python,
one SQLAlchemy transaction per record (an upsert), and a synchronous
offset commit after each record. Prints one JSON line with what it
measured (reference_transform.report).

    python pipeline1_python.py --bootstrap HOST:PORT --topic T --url postgresql+psycopg2://... --records N
"""

import argparse
import time

from confluent_kafka import Consumer
from sqlalchemy import create_engine, text

from reference_transform import cpu_seconds, report, transform

COLUMNS = ["order_id", "customer_id", "amount", "currency", "status", "updated_at", "processed_by"]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--table", default="py_pipeline_orders")
    args = p.parse_args()

    engine = create_engine(args.url)
    with engine.begin() as c:
        c.execute(text(f"DROP TABLE IF EXISTS {args.table}"))
        c.execute(
            text(
                f"CREATE TABLE {args.table} (order_id BIGINT PRIMARY KEY, customer_id TEXT, "
                "amount DOUBLE PRECISION, currency TEXT, status TEXT, updated_at TEXT, processed_by TEXT)"
            )
        )
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS[1:])
    upsert = text(
        f"INSERT INTO {args.table} ({', '.join(COLUMNS)}) "
        f"VALUES ({', '.join(':' + c for c in COLUMNS)}) "
        f"ON CONFLICT (order_id) DO UPDATE SET {updates}"
    )
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"py-pipeline1-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([args.topic])
    done = 0
    started = cpu_started = None
    while done < args.records:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            raise SystemExit(f"consumer error: {msg.error()}")
        if started is None:
            started, cpu_started = time.perf_counter(), cpu_seconds()
        order = transform(msg.value())
        with engine.begin() as c:
            c.execute(upsert, {c: order.get(c) for c in COLUMNS})
        consumer.commit(message=msg, asynchronous=False)
        done += 1
    elapsed = time.perf_counter() - started
    report(done, elapsed, cpu_started)
    consumer.close()


if __name__ == "__main__":
    main()
