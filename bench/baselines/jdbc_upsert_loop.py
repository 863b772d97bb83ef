"""The reference pipeline the JDBC sink is measured against: the simple
row-at-a-time loop people write first. A confluent-kafka consumer, one
SQLAlchemy transaction per record (an upsert), and a manual offset commit
after each record. Prints one JSON line with what it measured.

    python jdbc_upsert_loop.py --bootstrap HOST:PORT --topic T --url postgresql://... --records N
"""

import argparse
import json
import resource
import time

from confluent_kafka import Consumer
from sqlalchemy import create_engine, text


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--records", type=int, required=True)
    p.add_argument("--table", default="py_orders")
    args = p.parse_args()

    engine = create_engine(args.url)
    with engine.begin() as c:
        c.execute(text(f"DROP TABLE IF EXISTS {args.table}"))
        c.execute(
            text(
                f"CREATE TABLE {args.table} (order_id BIGINT PRIMARY KEY, customer_id TEXT, "
                "amount DOUBLE PRECISION, currency TEXT, status TEXT, updated_at TEXT)"
            )
        )
    upsert = text(
        f"INSERT INTO {args.table} (order_id, customer_id, amount, currency, status, updated_at) "
        "VALUES (:order_id, :customer_id, :amount, :currency, :status, :updated_at) "
        "ON CONFLICT (order_id) DO UPDATE SET customer_id = EXCLUDED.customer_id, "
        "amount = EXCLUDED.amount, currency = EXCLUDED.currency, status = EXCLUDED.status, "
        "updated_at = EXCLUDED.updated_at"
    )
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"py-baseline-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([args.topic])
    done = 0
    started = None
    cpu_start = None
    while done < args.records:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            raise SystemExit(f"consumer error: {msg.error()}")
        if started is None:
            started = time.perf_counter()
            r = resource.getrusage(resource.RUSAGE_SELF)
            cpu_start = r.ru_utime + r.ru_stime
        order = json.loads(msg.value())
        with engine.begin() as c:
            c.execute(upsert, order)
        consumer.commit(message=msg, asynchronous=False)
        done += 1
    elapsed = time.perf_counter() - started
    r = resource.getrusage(resource.RUSAGE_SELF)
    consumer.close()
    print(
        json.dumps(
            {
                "records": done,
                "seconds": elapsed,
                "records_per_second": done / elapsed,
                "cpu_seconds": r.ru_utime + r.ru_stime - cpu_start,
                "peak_rss_kib": r.ru_maxrss,
            }
        )
    )


if __name__ == "__main__":
    main()
