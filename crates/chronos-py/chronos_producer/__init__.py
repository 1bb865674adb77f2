"""chronos-producer: enqueue tasks that chronos-rs workers run, from Python.

Follows producer contract v1 (``crates/chronos-protocol/contract/CONTRACT.md``)::

    import redis
    from chronos_producer import Producer
    p = Producer(redis.Redis.from_url("redis://127.0.0.1:6379"))
    info = p.enqueue("email:send", {"to": "ada@example.com"}, process_in=60_000)
"""

from .envelope import Envelope, fingerprint, unique_key
from .producer import (
    PRODUCER_NAME,
    ConnectionLost,
    DuplicateTask,
    EnqueueError,
    InvalidOption,
    InvalidQueue,
    InvalidTaskId,
    PayloadTooLarge,
    Producer,
    ProducerError,
    Task,
    TaskIdConflict,
    TaskInfo,
    ValidationError,
    __version__,
)

__all__ = [
    "ConnectionLost",
    "DuplicateTask",
    "EnqueueError",
    "Envelope",
    "InvalidOption",
    "InvalidQueue",
    "InvalidTaskId",
    "PRODUCER_NAME",
    "PayloadTooLarge",
    "Producer",
    "ProducerError",
    "Task",
    "TaskIdConflict",
    "TaskInfo",
    "ValidationError",
    "__version__",
    "fingerprint",
    "unique_key",
]
