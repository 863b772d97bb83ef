"""The Kafka side both confluent-kafka scripts share: writing serialized
values and reading them back through a deserializer."""
import datetime
import json

from confluent_kafka import Consumer, Producer
from confluent_kafka.serialization import MessageField, SerializationContext


def produce(bootstrap, topic, values, serialize):
    """Writes each value of `values` (keyed 1, 2, ...) to partition 0,
    serialized by `serialize(value, ctx)`."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values, start=1):
        data = serialize(value, SerializationContext(topic, MessageField.VALUE))
        producer.produce(topic, key=str(i).encode(), value=data, partition=0)
    assert producer.flush(30) == 0, "undelivered records"


def consume(bootstrap, topic, n, group, deserialize, plain=lambda v: v):
    """Prints the first `n` values of `topic` as JSON lines, each with its
    schema id, deserialized by `deserialize(bytes, ctx)` and made JSON by
    `plain`; fails if they do not all arrive within 90 s."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{group}-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen = 0
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=90)
    while seen < n and datetime.datetime.now() < deadline:
        m = consumer.poll(1.0)
        if m is None:
            continue
        if m.error():
            raise SystemExit(f"consume: {m.error()}")
        value = deserialize(m.value(), SerializationContext(topic, MessageField.VALUE))
        print(json.dumps({"schema_id": int.from_bytes(m.value()[1:5], "big"), "value": plain(value)}))
        seen += 1
    consumer.close()
    if seen < n:
        raise SystemExit(f"consume: {seen} of {n} records within 90 s")
