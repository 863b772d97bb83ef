"""What the pipeline baselines share: their consumer, the reference
transform (examples/transforms/rust) in Python, and the line they report."""

import json
import resource
import time

from confluent_kafka import Consumer


def order_consumer(bootstrap: str, name: str) -> Consumer:
    """A consumer in a group of its own (so it reads from the start),
    committing by hand, reading committed records only."""
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{name}-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )


def transform(value: bytes) -> dict:
    """Uppercases `status`, adds `processed_by`, keeps every other field."""
    order = json.loads(value)
    if isinstance(order.get("status"), str):
        order["status"] = order["status"].upper()
    order["processed_by"] = "sluice"
    return order


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def report(done: int, elapsed: float, cpu_started: float) -> None:
    """Prints one JSON line: throughput and CPU seconds from the first
    record on, and peak resident memory."""
    print(
        json.dumps(
            {
                "records": done,
                "seconds": elapsed,
                "records_per_second": done / elapsed,
                "cpu_seconds": cpu_seconds() - cpu_started,
                "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            }
        ),
        flush=True,
    )
