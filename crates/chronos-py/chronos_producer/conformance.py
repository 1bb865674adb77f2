"""Runs the enqueue vectors of producer contract v1 (``v1/enqueue.json``) and prints one JSON
report on stdout, for ``tests/tests/producer_contract.rs``::

    python3 crates/chronos-py/conformance.py --redis URL --namespace NS --vectors PATH/enqueue.json

Each case is one :meth:`Producer.enqueue_batch` call into the file's ``queue`` with its
``kind``; per task the report has ``{id, state, outcome}`` or ``{error, message}`` with
``error`` one of ``duplicate``, ``id_conflict``, ``invalid``, ``other``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional, Sequence

import redis

from .producer import (
    PRODUCER_NAME,
    DuplicateTask,
    Producer,
    Task,
    TaskIdConflict,
    TaskInfo,
    ValidationError,
)


def task_of(kind: str, spec: Dict[str, Any]) -> Task:
    """The :class:`Task` of one vector task (``payload`` and ``options``)."""
    o = spec.get("options") or {}
    return Task(
        kind,
        spec.get("payload"),
        process_in=o.get("process_in_ms"),
        process_at=o.get("process_at_ms"),
        unique_ttl=o.get("unique_ttl_ms"),
        id=o.get("id"),
        retention=o.get("retention_ms"),
        max_retry=o.get("max_retry"),
        timeout=o.get("timeout_ms"),
        deadline=o.get("deadline_ms"),
        discard=bool(o.get("discard", False)),
        headers=o.get("headers"),
    )


def result_of(r: Any) -> Dict[str, Any]:
    """One task's line of the report."""
    if isinstance(r, TaskInfo):
        return {"id": r.id, "state": r.state, "outcome": r.outcome}
    if isinstance(r, DuplicateTask):
        code = "duplicate"
    elif isinstance(r, TaskIdConflict):
        code = "id_conflict"
    elif isinstance(r, ValidationError):
        code = "invalid"
    else:
        code = "other"
    return {"error": code, "message": str(r)}


def run(producer: Producer, vectors: Dict[str, Any]) -> Dict[str, Any]:
    """Every case of ``vectors`` in order; the report."""
    queue, kind = vectors["queue"], vectors["kind"]
    cases: List[Dict[str, Any]] = []
    for case in vectors["cases"]:
        tasks = [task_of(kind, t) for t in case["tasks"]]
        results = producer.enqueue_batch(tasks, queue=queue)
        cases.append({"name": case["name"], "results": [result_of(r) for r in results]})
    return {"producer": PRODUCER_NAME, "cases": cases}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", required=True, help="Redis URL, e.g. redis://127.0.0.1:6379")
    ap.add_argument("--namespace", default="chronos")
    ap.add_argument("--vectors", required=True, help="path of v1/enqueue.json")
    ap.add_argument("--scripts-dir", default=None, help="folder of push.lua and enqueue.lua")
    args = ap.parse_args(argv)
    with open(args.vectors, encoding="utf-8") as f:
        vectors = json.load(f)
    client = redis.Redis.from_url(args.redis)
    try:
        producer = Producer(client, namespace=args.namespace, scripts_dir=args.scripts_dir)
        report = run(producer, vectors)
    finally:
        client.close()
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
