"""The reference transform, in Python (world `transform`, built with
componentize-py): parses the JSON value, uppercases one field, adds a field,
drops records flagged for dropping, and fails a value that is not a JSON
object with a `data` error. Tombstones (no value) pass through untouched.

| key             | default        | meaning                                   |
|-----------------|----------------|-------------------------------------------|
| uppercase.field | status         | string field to uppercase                 |
| add.field       | processed_by   | field to add                              |
| add.value       | sluice         | its value                                 |
| drop.field      | drop           | records whose value has it set to `true` are dropped |
"""

import json

from wit_world import exports
from wit_world.imports.types import ErrorClass, KafkaRecord, TransformError
from componentize_py_types import Err, Ok

DEFAULTS = {
    "uppercase.field": "status",
    "add.field": "processed_by",
    "add.value": "sluice",
    "drop.field": "drop",
}

_config = dict(DEFAULTS)


def _data_error(message: str) -> TransformError:
    return TransformError(ErrorClass.DATA, message)


def _apply(record: KafkaRecord) -> list[KafkaRecord]:
    """The records `record` becomes; raises Err(TransformError) if it is bad."""
    if record.value is None:
        return [record]  # a tombstone passes through untouched
    try:
        value = json.loads(bytes(record.value).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Err(_data_error(
            f"value of {record.topic}-{record.partition}@{record.offset} is not JSON: {e}"))
    if not isinstance(value, dict):
        raise Err(_data_error("value is JSON but not an object"))
    if value.get(_config["drop.field"]) is True:
        return []
    field = _config["uppercase.field"]
    if isinstance(value.get(field), str):
        value[field] = value[field].upper()
    value[_config["add.field"]] = _config["add.value"]
    record.value = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return [record]


class Transformer(exports.Transformer):
    def configure(self, config: list[tuple[str, str]]) -> None:
        global _config
        new = dict(DEFAULTS)
        for key, value in config:
            if key not in DEFAULTS:
                raise Err(TransformError(
                    ErrorClass.FATAL,
                    f"unknown config key `{key}` (known: {', '.join(DEFAULTS)})"))
            new[key] = value
        _config = new

    def transform(self, input: KafkaRecord) -> list[KafkaRecord]:
        return _apply(input)

    def transform_batch(self, input: list[KafkaRecord]):
        results = []
        for record in input:
            try:
                results.append(Ok(_apply(record)))
            except Err as e:
                results.append(e)
        return results
