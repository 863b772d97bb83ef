"""Pipeline 1's baseline: Kafka -> transform -> PostgreSQL upsert, the
simple way. A confluent-kafka consumer, the reference transform in Python,
one SQLAlchemy transaction per record (an upsert), and a synchronous
offset commit after each record. With --no-transform it is the JDBC
sink's baseline: the same loop writing the records as they are. Prints
one JSON line with what it measured (reference_transform.report).

    python pipeline1_python.py --bootstrap HOST:PORT --topic T --url postgresql+psycopg2://... --records N [--no-transform]
"""

import argparse
import json
import time

from sqlalchemy import create_engine, text

from reference_transform import cpu_seconds, order_consumer, report, transform

COLUMNS = ["order_id", "customer_id", "amount", "currency", "status", "updated_at", "processed_by"]
# Every other column is TEXT.
TYPES = {"order_id": "BIGINT PRIMARY KEY", "amount": "DOUBLE PRECISION"}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--table", default="py_pipeline_orders")
    p.add_argument("--no-transform", action="store_true")
    args = p.parse_args()
    # Without the transform there is no processed_by.
    columns = COLUMNS[:-1] if args.no_transform else COLUMNS

    engine = create_engine(args.url)
    with engine.begin() as c:
        c.execute(text(f"DROP TABLE IF EXISTS {args.table}"))
        definitions = ", ".join(f"{c} {TYPES.get(c, 'TEXT')}" for c in columns)
        c.execute(text(f"CREATE TABLE {args.table} ({definitions})"))
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns[1:])
    upsert = text(
        f"INSERT INTO {args.table} ({', '.join(columns)}) "
        f"VALUES ({', '.join(':' + c for c in columns)}) "
        f"ON CONFLICT (order_id) DO UPDATE SET {updates}"
    )
    consumer = order_consumer(args.bootstrap, "py-pipeline1")
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
        order = json.loads(msg.value()) if args.no_transform else transform(msg.value())
        with engine.begin() as c:
            c.execute(upsert, {c: order.get(c) for c in columns})
        consumer.commit(message=msg, asynchronous=False)
        done += 1
    elapsed = time.perf_counter() - started
    report(done, elapsed, cpu_started)
    consumer.close()


if __name__ == "__main__":
    main()
