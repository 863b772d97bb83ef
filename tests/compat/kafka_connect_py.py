"""A third-party client, unchanged, against Apache Kafka Connect and Sluice.

kafka-connect-py (PyPI, pinned in scripts/kafka-connect-py.sh) drives one
connector's lifecycle on each worker: cluster info, create, status, list,
pause, resume, restart (plain and with its tasks), task restart, config
update, config, tasks, topics, validate, delete, and the errors a client
meets (a duplicate, an unknown connector). Every call's answer, or the HTTP
status of the error the client raised, must be the same on both, after
each side's names are mapped back to placeholders and the values that
differ between any two workers (worker ids, versions, timestamps) to their
types. Exits 1 on any difference, 2 when it cannot run.

    kafka_connect_py.py KAFKA_CONNECT_URL SLUICE_URL DIR RUN

Run by the real-Kafka suite (real_kafka::compat_rest); DIR holds a
directory per side (kc/, sl/) with in.txt.
"""

import json
import sys
import time

try:
    from kafka_connect import KafkaConnect
    from requests.exceptions import HTTPError
except ImportError as e:  # the venv of scripts/kafka-connect-py.sh
    print(f"kafka_connect_py.py: cannot import kafka-connect-py ({e}): run scripts/kafka-connect-py.sh install",
          file=sys.stderr)
    sys.exit(2)

VOLATILE = {"worker_id", "trace", "last_modified", "version", "commit", "kafka_cluster_id"}


class Side:
    def __init__(self, what, url, directory, run, tag):
        self.what = what
        self.client = KafkaConnect(url=url)
        self.vars = {
            "{name}": f"pyclient-{run}-{tag}",
            "{topic}": f"pyclient-{run}-{tag}-lines",
            "{dir}": f"{directory}/{tag}",
        }

    def fill(self, value):
        text = json.dumps(value)
        for k, v in self.vars.items():
            text = text.replace(k, v)
        return json.loads(text)

    def normalize(self, value):
        if isinstance(value, dict):
            return {self.unfill(k): (f"<{type(v).__name__}>" if k in VOLATILE else self.normalize(v))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self.normalize(v) for v in value]
        if isinstance(value, str):
            return self.unfill(value)
        return value

    def unfill(self, text):
        # Longest first, so that no value is replaced inside a longer one.
        for k, v in sorted(self.vars.items(), key=lambda kv: -len(kv[1])):
            text = text.replace(v, k)
        return text

    def call(self, method, *args, **kwargs):
        """The client's answer, or the status of the HTTP error it raised."""
        args = self.fill(list(args))
        kwargs = self.fill(kwargs)
        try:
            return {"answer": self.normalize(getattr(self.client, method)(*args, **kwargs))}
        except HTTPError as e:
            if e.response is not None:
                return {"error": e.response.status_code}
            # Some calls raise HTTPError(response.text): the error body.
            try:
                return {"error": json.loads(str(e))["error_code"]}
            except (ValueError, KeyError, TypeError):
                return {"error": str(e)[:60]}

    def wait(self, state, with_tasks=True):
        deadline = time.monotonic() + 120
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.client.get_connector_status(self.vars["{name}"])
                tasks = last.get("tasks", [])
                if last["connector"]["state"] == state and all(t["state"] == state for t in tasks) \
                        and (tasks or not with_tasks):
                    return
            except HTTPError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"kafka_connect_py.py: {self.what}: {state} not reached in 120 s; last status: {last}")

    def wait_topics(self):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            topics = self.client.list_connector_topics(self.vars["{name}"])
            if any(t.get("topics") for t in topics.values()):
                return
            time.sleep(0.2)
        raise SystemExit(f"kafka_connect_py.py: {self.what}: no topics listed in 120 s")


def lifecycle():
    """(label, method, args, kwargs, wait before): the calls, in order."""
    config = {"connector.class": "FileStreamSource", "tasks.max": "1",
              "file": "{dir}/in.txt", "topic": "{topic}"}
    updated = dict(config, **{"batch.size": "50"})
    return [
        ("cluster-info", "get_cluster_info", [], {}, None),
        ("create", "create_connector", [{"name": "{name}", "config": config}], {}, None),
        ("create-duplicate", "create_connector", [{"name": "{name}", "config": config}], {}, None),
        ("status", "get_connector_status", ["{name}"], {}, "RUNNING"),
        ("get", "get_connector", ["{name}"], {}, None),
        ("topics", "list_connector_topics", ["{name}"], {}, "topics"),
        ("list", "list_connectors", [], {"pattern": "{name}"}, None),
        ("list-status", "list_connectors", [], {"expand": "status", "pattern": "{name}"}, None),
        ("list-running", "list_connectors", [], {"expand": "info", "pattern": "{name}", "state": "running"}, None),
        ("pause", "pause_connector", ["{name}"], {}, None),
        ("status-paused", "get_connector_status", ["{name}"], {}, "PAUSED"),
        ("list-paused", "list_connectors", [], {"pattern": "{name}", "state": "paused"}, None),
        ("resume", "resume_connector", ["{name}"], {}, None),
        ("status-resumed", "get_connector_status", ["{name}"], {}, "RUNNING"),
        ("restart", "restart_connector", ["{name}"], {}, None),
        ("restart-tasks", "restart_connector", ["{name}"], {"include_tasks": True}, "RUNNING"),
        ("restart-failed", "restart_connector", ["{name}"], {"include_tasks": True, "only_failed": True}, "RUNNING"),
        ("restart-task", "restart_connector_task", ["{name}", 0], {}, "RUNNING"),
        ("task-status", "get_connector_task_status", ["{name}", 0], {}, "RUNNING"),
        ("update", "update_connector", ["{name}", updated], {}, None),
        ("config", "get_connector_config", ["{name}"], {}, None),
        ("status-updated", "get_connector_status", ["{name}"], {}, "RUNNING"),
        ("validate", "validate_connector_config", ["FileStreamSourceConnector", config], {}, None),
        ("delete", "delete_connector", ["{name}"], {}, None),
        ("get-deleted", "get_connector", ["{name}"], {}, None),
        ("status-deleted", "get_connector_status", ["{name}"], {}, None),
        ("restart-deleted", "restart_connector", ["{name}"], {}, None),
    ]


def comparable(label, result):
    """What is compared of a call's result (see docs/compatibility.md)."""
    answer = result.get("answer")
    if label == "create" and isinstance(answer, dict):
        # Accepted difference `create-source` `$.tasks`: Kafka Connect answers
        # before the connector made its task configs.
        answer = {k: v for k, v in answer.items() if k != "tasks"}
    if label == "validate" and isinstance(answer, dict):
        # The definitions are each plugin's own text; the verdict is compared.
        answer = {"name": answer.get("name"), "error_count": answer.get("error_count")}
    if label == "cluster-info" and isinstance(answer, dict):
        # Sluice also names the worker (accepted difference `root` `$.worker_id`).
        answer = {k: v for k, v in answer.items() if k != "worker_id"}
    return dict(result, answer=answer) if "answer" in result else result


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    kc_url, sl_url, directory, run = sys.argv[1:]
    sides = [Side("Kafka Connect", kc_url, directory, run, "kc"), Side("Sluice", sl_url, directory, run, "sl")]
    differences = []
    calls = lifecycle()
    for label, method, args, kwargs, wait in calls:
        results = []
        for side in sides:
            if wait == "topics":
                side.wait_topics()
            elif wait:
                side.wait(wait)
            results.append(comparable(label, side.call(method, *args, **kwargs)))
        if results[0] != results[1]:
            differences.append(f"{label} ({method}): Kafka Connect {json.dumps(results[0])[:400]}\n"
                               f"    Sluice {json.dumps(results[1])[:400]}")
    for d in differences:
        print(f"DIFFERENT {d}", file=sys.stderr)
    print(f"kafka-connect-py: {len(calls)} calls, {len(differences)} different answers", file=sys.stderr)
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
