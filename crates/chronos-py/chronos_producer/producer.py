"""Enqueue tasks for chronos-rs workers, under producer contract v1
(``crates/chronos-protocol/contract/CONTRACT.md``).

A :class:`Producer` validates each task, encodes its envelope (:mod:`.envelope`) and runs the
contract's scripts (``v1/push.lua`` for plain tasks, ``v1/enqueue.lua`` for the others) with
EVALSHA, one call per queue and chunk. Every call names a receipt, so a call whose reply was
lost is re-sent unchanged and answered from the receipt instead of writing again, as long as
the receipt surely still lives; past that the producer answers :class:`ConnectionLost`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .envelope import DEFAULT_MAX_RETRY, Envelope, fingerprint, unique_key

__version__ = "0.1.0"
#: The ``chronos-producer`` header every task carries.
PRODUCER_NAME = f"chronos-py/{__version__}"
CODEC_HEADER = "chronos-codec"
PRODUCER_HEADER = "chronos-producer"

#: A duration: milliseconds (int) or a timedelta.
Millis = Union[int, timedelta]
#: A point in time: unix milliseconds (int) or a datetime (a naive one is local time).
Instant = Union[int, datetime]

#: The consumer group of every queue stream.
GROUP = "workers"
#: Plain tasks per push.lua call, as the Rust producer.
PUSH_CHUNK = 500
#: Tasks per enqueue.lua call, as the Rust producer.
ENQUEUE_CHUNK = 125
#: Default payload limit (bytes of the encoded payload).
DEFAULT_MAX_PAYLOAD = 1 << 20
#: How long a call's receipt lives (ms), longer than any re-send.
DEFAULT_RECEIPT_TTL_MS = 15000
#: A re-send goes out only while this much of the receipt's TTL is left after it (ms): the
#: receipt's clock starts when Redis runs the first send, which is after the producer's, and
#: a re-send still takes time to reach Redis.
RESEND_MARGIN_MS = 1000
MAX_NAME_LEN = 128
MAX_ID_LEN = 256

_I64_MAX = (1 << 63) - 1
_I64_MIN = -(1 << 63)
_U32_MAX = (1 << 32) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_PLAIN_ID = re.compile(r"[0-9]+-[0-9]+\Z")


# --- errors -------------------------------------------------------------------------------


class EnqueueError(Exception):
    """A task that was not enqueued. ``queue``, ``kind`` and ``task_id`` name it where known."""

    def __init__(
        self,
        message: str,
        *,
        queue: Optional[str] = None,
        kind: Optional[str] = None,
        task_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.queue = queue
        self.kind = kind
        self.task_id = task_id


class ValidationError(EnqueueError):
    """The task breaks a rule of the contract; it was checked before sending, nothing was
    written."""


class InvalidQueue(ValidationError):
    """A queue name that is empty, longer than 128 bytes, or holds ``{``, ``}``, whitespace
    or control characters."""


class InvalidTaskId(ValidationError):
    """An explicit id that is empty, longer than 256 bytes, holds whitespace or control
    characters, or has the shape ``<digits>-<digits>`` reserved for plain tasks."""


class PayloadTooLarge(ValidationError):
    """The encoded payload is over the producer's limit (``max_payload``)."""


class InvalidOption(ValidationError):
    """An option (or the kind, or the payload) of a type or value the contract cannot carry."""


class DuplicateTask(EnqueueError):
    """A unique task whose lock another task holds (same queue, kind and payload while the
    lock lives): nothing was written (row ``-1``)."""


class TaskIdConflict(EnqueueError):
    """The explicit id holds a different task (another fingerprint): nothing was written
    (row ``-2``)."""


class ProducerError(EnqueueError):
    """Redis answered something the contract does not allow (a bad reply, a key of the wrong
    type, a command error). Whether the task was written is said in the message."""


class ConnectionLost(ProducerError):
    """Redis could not be reached, even after re-sending the call: the task may or may not be
    in Redis (a re-send within the receipt TTL with the same call would tell, but the caller
    no longer has it). ``__cause__`` is the last redis-py error."""


# --- tasks and results ------------------------------------------------------------------------


@dataclass
class Task:
    """One task of :meth:`Producer.enqueue_batch`. ``payload`` is any JSON-serializable value.
    ``queue`` None means the batch's queue. See :meth:`Producer.enqueue` for the options."""

    kind: str
    payload: Any = None
    queue: Optional[str] = None
    process_in: Optional[Millis] = None
    process_at: Optional[Instant] = None
    unique_ttl: Optional[Millis] = None
    id: Optional[str] = None
    retention: Optional[Millis] = None
    max_retry: Optional[int] = None
    timeout: Optional[Millis] = None
    deadline: Optional[Instant] = None
    discard: bool = False
    headers: Optional[Mapping[str, str]] = None


@dataclass(frozen=True)
class TaskInfo:
    """A task that is in Redis.

    ``state`` is ``"pending"`` (ready) or ``"scheduled"`` for a task this call wrote, or the
    stored state of a task that was already there (then ``outcome`` is ``"existing"``).
    ``run_at_ms`` is when it is due (unix ms, Redis's clock for ready tasks)."""

    id: str
    queue: str
    kind: str
    state: str
    outcome: str
    run_at_ms: int


@dataclass
class _Prepared:
    index: int
    queue: str
    env: Envelope
    data: bytes
    plain: bool
    explicit: bool
    at_ms: int  # 0: none
    delay_ms: Optional[int]  # None: none
    unique_ttl_ms: int  # 0: not unique


@dataclass
class _Script:
    name: str
    text: bytes
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        self.sha = hashlib.sha1(self.text).hexdigest()


def _default_scripts_dir() -> Path:
    return Path(__file__).resolve().parent.parent.parent / "chronos-protocol" / "contract" / "v1"


# --- validation helpers -------------------------------------------------------------------


def _bad_chars(s: str) -> bool:
    return any(c.isspace() or unicodedata.category(c) == "Cc" for c in s)


def check_queue(name: Any) -> None:
    """Raises :class:`InvalidQueue` unless ``name`` is a valid queue name (or namespace)."""
    if not isinstance(name, str):
        raise InvalidQueue(f"queue name must be a str, not {type(name).__name__}")
    reason = None
    if not name:
        reason = "must not be empty"
    elif len(name.encode("utf-8")) > MAX_NAME_LEN:
        reason = f"must be at most {MAX_NAME_LEN} bytes"
    elif "{" in name or "}" in name:
        reason = "must not contain '{' or '}'"
    elif _bad_chars(name):
        reason = "must not contain whitespace or control characters"
    if reason:
        raise InvalidQueue(f"invalid queue name {name!r}: {reason}", queue=name)


def check_task_id(task_id: Any) -> None:
    """Raises :class:`InvalidTaskId` unless ``task_id`` is a valid explicit id."""
    if not isinstance(task_id, str):
        raise InvalidTaskId(f"task id must be a str, not {type(task_id).__name__}")
    reason = None
    if not task_id:
        reason = "must not be empty"
    elif len(task_id.encode("utf-8")) > MAX_ID_LEN:
        reason = f"must be at most {MAX_ID_LEN} bytes"
    elif _bad_chars(task_id):
        reason = "must not contain whitespace or control characters"
    elif _PLAIN_ID.match(task_id):
        reason = "must not have the shape `<digits>-<digits>` of a generated id"
    if reason:
        raise InvalidTaskId(f"invalid task id {task_id!r}: {reason}", task_id=task_id)


def _millis(name: str, v: Millis, minimum: int = 0) -> int:
    if isinstance(v, timedelta):
        ms = v // timedelta(milliseconds=1)
    elif isinstance(v, int) and not isinstance(v, bool):
        ms = v
    else:
        raise InvalidOption(f"{name} must be an int (ms) or a timedelta, not {type(v).__name__}")
    if ms < minimum:
        raise InvalidOption(f"{name} must be at least {minimum} ms (got {ms})")
    if ms > _I64_MAX:
        raise InvalidOption(f"{name} is too large ({ms} ms)")
    return ms


def _instant(name: str, v: Instant) -> int:
    if isinstance(v, datetime):
        aware = v if v.tzinfo is not None else v.astimezone()
        ms = (aware - _EPOCH) // timedelta(milliseconds=1)
    elif isinstance(v, int) and not isinstance(v, bool):
        ms = v
    else:
        raise InvalidOption(
            f"{name} must be an int (unix ms) or a datetime, not {type(v).__name__}"
        )
    if not _I64_MIN <= ms <= _I64_MAX:
        raise InvalidOption(f"{name} is out of range ({ms} ms)")
    return ms


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _integer(v: Any, what: str) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ProducerError(f"bad reply from {what}: {v!r} is not an integer") from None


# --- the producer -----------------------------------------------------------------------------


class Producer:
    """Enqueues tasks into a chronos-rs namespace through a redis-py client.

    Thread-safe as far as the redis-py client is. ``client`` may decode responses or not.

    - ``namespace``: the key prefix the workers use (default ``chronos``).
    - ``scripts_dir``: where ``push.lua`` and ``enqueue.lua`` are (default: the contract's
      ``v1`` folder of the repository this package sits in).
    - ``max_payload``: largest encoded payload accepted, in bytes (default 1 MiB).
    - ``receipt_ttl_ms``: how long each call's receipt lives in Redis (default 15000).
    - ``resends`` / ``resend_backoff``: how many times a call whose reply was lost (a redis-py
      ConnectionError or TimeoutError) is re-sent, the same call with the same receipt, and the
      first pause in seconds (doubled each time). A re-send goes out only while the receipt
      surely still lives: not once ``receipt_ttl_ms`` less one second has passed since the
      first send (then :class:`ConnectionLost`), since a re-send that finds no receipt would
      enqueue its tasks a second time.

    redis-py's own retries (the client's ``retry=``, on by default since redis-py 6) re-send a
    call without the producer timing them: keep them well within ``receipt_ttl_ms`` (a
    ``socket_connect_timeout`` bounds each try), or raise ``receipt_ttl_ms``.
    """

    def __init__(
        self,
        client: "redis.Redis",
        namespace: str = "chronos",
        *,
        scripts_dir: Optional[Union[str, os.PathLike]] = None,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        receipt_ttl_ms: int = DEFAULT_RECEIPT_TTL_MS,
        resends: int = 3,
        resend_backoff: float = 0.05,
    ) -> None:
        try:
            check_queue(namespace)
        except InvalidQueue as e:
            raise ValueError(str(e).replace("queue name", "namespace")) from None
        folder = Path(scripts_dir) if scripts_dir is not None else _default_scripts_dir()
        try:
            self._push = _Script("push.lua", (folder / "push.lua").read_bytes())
            self._enqueue = _Script("enqueue.lua", (folder / "enqueue.lua").read_bytes())
        except OSError as e:
            raise FileNotFoundError(
                f"the contract scripts push.lua and enqueue.lua are not in {folder} "
                f"(pass scripts_dir=): {e}"
            ) from e
        self.client = client
        self.namespace = namespace
        self.max_payload = max_payload
        self.receipt_ttl_ms = receipt_ttl_ms
        self.resends = resends
        self.resend_backoff = resend_backoff
        self._known: set = set()
        self._lock = threading.Lock()

    # -- keys --

    def _key(self, queue: str, name: str) -> str:
        return f"{self.namespace}:{{{queue}}}:{name}"

    # -- public API --

    def enqueue(
        self,
        kind: str,
        payload: Any = None,
        *,
        queue: str = "default",
        process_in: Optional[Millis] = None,
        process_at: Optional[Instant] = None,
        unique_ttl: Optional[Millis] = None,
        id: Optional[str] = None,
        retention: Optional[Millis] = None,
        max_retry: Optional[int] = None,
        timeout: Optional[Millis] = None,
        deadline: Optional[Instant] = None,
        discard: bool = False,
        headers: Optional[Mapping[str, str]] = None,
    ) -> TaskInfo:
        """Enqueues one task of ``kind`` with ``payload`` (JSON-encoded compactly) into
        ``queue``; its :class:`TaskInfo` once Redis holds it.

        Options: ``process_in`` (delay) or ``process_at`` (run time; a past one runs at once);
        ``unique_ttl`` (no other task of the same queue, kind and payload while the lock
        lives); ``id`` (an explicit id: enqueueing it again with the same task answers
        ``outcome="existing"`` and writes nothing); ``retention`` (keep the completed task);
        ``max_retry`` (retries after the first attempt, 25 by default); ``timeout`` (per
        attempt); ``deadline`` (not run after it); ``discard`` (drop instead of archive when it
        dies); ``headers`` (handed to the handler). ``chronos-codec: json`` and
        ``chronos-producer`` are always set.

        Raises an :class:`EnqueueError` subclass when the task is not enqueued: validation
        errors before anything is sent, :class:`DuplicateTask`, :class:`TaskIdConflict`,
        :class:`ProducerError` (:class:`ConnectionLost` when Redis stayed unreachable).
        """
        task = Task(
            kind,
            payload,
            queue=queue,
            process_in=process_in,
            process_at=process_at,
            unique_ttl=unique_ttl,
            id=id,
            retention=retention,
            max_retry=max_retry,
            timeout=timeout,
            deadline=deadline,
            discard=discard,
            headers=headers,
        )
        result = self.enqueue_batch([task], queue=queue)[0]
        if isinstance(result, EnqueueError):
            raise result
        return result

    def enqueue_batch(
        self, tasks: Sequence[Task], queue: str = "default"
    ) -> List[Union[TaskInfo, EnqueueError]]:
        """Enqueues ``tasks`` (each into its own ``queue``, else into ``queue``); per task, in
        order, its :class:`TaskInfo` or the :class:`EnqueueError` that says why it was not
        enqueued (returned, not raised).

        A task that fails validation is not sent; the others are. Per queue, plain tasks go in
        push.lua calls (up to 500 each; their ids are consecutive stream entry ids) and the
        others in enqueue.lua calls (up to 125 each; each call is atomic). A call whose reply
        is lost is re-sent unchanged while its receipt surely lives, so a re-send writes
        nothing twice; when the reply stays lost, the tasks of that call are answered
        :class:`ConnectionLost` (they may or may not be in Redis).

        Never raises for a bad task: whatever validating or encoding a task raises (an
        ``Exception``; a payload nested too deep included) is answered for that task as a
        :class:`ValidationError`, and the other tasks still go.
        """
        results: List[Optional[Union[TaskInfo, EnqueueError]]] = [None] * len(tasks)
        now = _now_ms()
        by_queue: Dict[str, List[_Prepared]] = {}
        for i, task in enumerate(tasks):
            try:
                p = self._prepare(i, task, queue, now)
            except EnqueueError as e:
                results[i] = e
                continue
            except Exception as e:  # noqa: BLE001 - a bad task must not fail the batch
                results[i] = _unexpected(e, task, queue)
                continue
            by_queue.setdefault(p.queue, []).append(p)
        for q, items in by_queue.items():
            try:
                self._register(q)
            except EnqueueError as e:
                for p in items:
                    results[p.index] = _for_task(e, p)
                continue
            plain = [p for p in items if p.plain]
            full = [p for p in items if not p.plain]
            for k in range(0, len(plain), PUSH_CHUNK):
                chunk = plain[k : k + PUSH_CHUNK]
                for p, r in zip(chunk, self._run_chunk(self._push_chunk, q, chunk)):
                    results[p.index] = r
            for k in range(0, len(full), ENQUEUE_CHUNK):
                chunk = full[k : k + ENQUEUE_CHUNK]
                for p, r in zip(chunk, self._run_chunk(self._enqueue_chunk, q, chunk)):
                    results[p.index] = r
        return [
            r if r is not None else ProducerError("task without a result") for r in results
        ]

    # -- building --

    def _prepare(self, index: int, task: Task, default_queue: str, now: int) -> _Prepared:
        queue = task.queue if task.queue is not None else default_queue
        kind = task.kind
        if not isinstance(kind, str) or not kind:
            raise InvalidOption(f"kind must be a non-empty str (got {kind!r})", queue=queue)
        check_queue(queue)
        ctx = {"queue": queue, "kind": kind, "task_id": task.id}
        try:
            explicit = task.id is not None
            if explicit:
                check_task_id(task.id)
            try:
                payload = json.dumps(
                    task.payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False
                ).encode("utf-8")
            except (TypeError, ValueError) as e:
                raise InvalidOption(f"payload is not JSON-serializable: {e}") from None
            except RecursionError:
                raise InvalidOption(
                    "payload is nested too deep to encode (more levels than Python's "
                    f"recursion limit, {sys.getrecursionlimit()})"
                ) from None
            if len(payload) > self.max_payload:
                raise PayloadTooLarge(
                    f"payload of {len(payload)} bytes is over the limit of "
                    f"{self.max_payload} bytes"
                )
            if task.process_in is not None and task.process_at is not None:
                raise InvalidOption("give process_in or process_at, not both")
            delay = None if task.process_in is None else _millis("process_in", task.process_in)
            at = None if task.process_at is None else _instant("process_at", task.process_at)
            uttl = None if task.unique_ttl is None else _millis("unique_ttl", task.unique_ttl, 1)
            retention = None if task.retention is None else _millis("retention", task.retention)
            timeout = None if task.timeout is None else _millis("timeout", task.timeout)
            deadline = None if task.deadline is None else _instant("deadline", task.deadline)
            max_retry = DEFAULT_MAX_RETRY if task.max_retry is None else task.max_retry
            if (
                not isinstance(max_retry, int)
                or isinstance(max_retry, bool)
                or not 0 <= max_retry <= _U32_MAX
            ):
                raise InvalidOption(f"max_retry must be an int from 0 to {_U32_MAX}")
            if not isinstance(task.discard, bool):
                raise InvalidOption("discard must be a bool")
            headers: Dict[str, str] = {}
            for k, v in (task.headers or {}).items():
                if not isinstance(k, str) or not isinstance(v, str):
                    raise InvalidOption(f"headers must map str to str (got {k!r}: {v!r})")
                headers[k] = v
            headers[CODEC_HEADER] = "json"
            headers[PRODUCER_HEADER] = PRODUCER_NAME
        except EnqueueError as e:
            raise _with(e, **ctx)
        plain = not explicit and delay is None and at is None and uttl is None and retention is None
        env = Envelope(
            id="" if plain else (task.id if explicit else secrets.token_hex(16)),
            kind=kind,
            queue=queue,
            payload=payload,
            enqueued_at_ms=now,
            max_retry=max_retry,
            timeout_ms=timeout,
            deadline_ms=deadline,
            unique_key=None if uttl is None else unique_key(queue, kind, payload),
            retention_ms=retention,
            discard=task.discard,
            headers=headers,
        )
        try:
            data = env.encode()
        except OverflowError as e:
            raise InvalidOption(str(e), **ctx) from None
        return _Prepared(
            index=index,
            queue=queue,
            env=env,
            data=data,
            plain=plain,
            explicit=explicit,
            at_ms=0 if at is None else max(at, 1),
            delay_ms=delay,
            unique_ttl_ms=0 if uttl is None else uttl,
        )

    # -- Redis --

    def _register(self, queue: str) -> None:
        """Creates the queue's stream and group and adds it to ``<ns>:queues``, once per
        producer."""
        with self._lock:
            if queue in self._known:
                return

        def run() -> None:
            try:
                self.client.execute_command(
                    "XGROUP", "CREATE", self._key(queue, "stream"), GROUP, "0", "MKSTREAM"
                )
            except ResponseError as e:
                if "BUSYGROUP" not in str(e):
                    raise
            self.client.execute_command("SADD", f"{self.namespace}:queues", queue)

        try:
            # Registering is idempotent in itself (no receipt): re-sent without a time bound.
            self._resending(run, timed=False)
        except RedisError as e:
            raise ProducerError(
                f"cannot register queue {queue!r}: {e}; nothing written", queue=queue
            ) from e
        with self._lock:
            self._known.add(queue)

    def _resending(self, call: Any, timed: bool) -> Any:
        """Runs ``call`` and, when the connection fails (the reply may be lost), runs it again,
        unchanged, up to ``resends`` times; with ``timed``, only while the call's receipt (set
        no earlier than the first send) surely still lives."""
        start = time.monotonic()
        tries = 0
        while True:
            try:
                return call()
            except (RedisConnectionError, RedisTimeoutError) as e:
                wait = self.resend_backoff * (2**tries)
                elapsed_ms = (time.monotonic() - start) * 1000
                late = timed and elapsed_ms + wait * 1000 >= (
                    self.receipt_ttl_ms - RESEND_MARGIN_MS
                )
                if tries >= self.resends or late:
                    raise ConnectionLost(
                        f"Redis unreachable after {tries + 1} tries in {elapsed_ms:.0f} ms "
                        f"({e}); the tasks of this call may or may not have been enqueued"
                    ) from e
                time.sleep(wait)
                tries += 1

    def _evalsha(self, script: _Script, keys: List[str], args: List[Any]) -> Any:
        for _ in range(3):
            try:
                return self.client.execute_command(
                    "EVALSHA", script.sha, len(keys), *keys, *args
                )
            except NoScriptError:
                loaded = _text(self.client.execute_command("SCRIPT", "LOAD", script.text))
                if loaded != script.sha:
                    raise ProducerError(f"SCRIPT LOAD of {script.name} answered sha {loaded}")
        raise ProducerError(f"{script.name} keeps missing from the script cache")

    def _call(self, script: _Script, keys: List[str], args: List[Any]) -> Tuple[Any, bool]:
        """One script call, re-sent unchanged (same receipt) while its reply is lost; the
        reply, and whether it came from a re-send."""
        sent = [0]

        def once() -> Any:
            sent[0] += 1
            return self._evalsha(script, keys, args)

        reply = self._resending(once, timed=True)
        return reply, sent[0] > 1

    def _run_chunk(self, run: Any, queue: str, chunk: List[_Prepared]) -> List[Any]:
        try:
            return run(queue, chunk)
        except EnqueueError as e:
            return [_for_task(e, p) for p in chunk]
        except RedisError as e:
            err = ProducerError(f"the enqueue call failed: {e}")
            err.__cause__ = e
            return [_for_task(err, p) for p in chunk]

    def _receipt(self, queue: str) -> str:
        return self._key(queue, "e:" + secrets.token_hex(8))

    def _push_chunk(self, queue: str, chunk: List[_Prepared]) -> List[Any]:
        keys = [self._key(queue, "stream"), self._receipt(queue), self._key(queue, "events")]
        policy = any(p.env.max_retry != DEFAULT_MAX_RETRY or p.env.discard for p in chunk)
        args: List[Any] = [self.receipt_ttl_ms, "1" if policy else ""]
        for p in chunk:
            args.append(p.data)
            if policy:
                mr = p.env.max_retry
                args.append("" if mr == DEFAULT_MAX_RETRY else str(mr))
                args.append("1" if p.env.discard else "")
        reply, _ = self._call(self._push, keys, args)
        if isinstance(reply, int):
            if reply == -3:
                raise ProducerError(
                    f"the stream of queue {queue!r} has the wrong type; nothing written"
                )
            raise ProducerError(f"push.lua answered {reply}")
        if isinstance(reply, (list, tuple)):
            ids = [_text(v) for v in reply]
        else:
            first = _text(reply)
            m = _PLAIN_ID.match(first)
            if not m:
                raise ProducerError(f"push.lua answered a bad first id {first!r}")
            ms, seq = first.split("-")
            ids = [f"{ms}-{int(seq) + k}" for k in range(len(chunk))]
        if len(ids) != len(chunk):
            raise ProducerError(f"push.lua answered {len(ids)} ids for {len(chunk)} tasks")
        return [
            TaskInfo(
                id=tid,
                queue=queue,
                kind=p.env.kind,
                state="pending",
                outcome="created",
                run_at_ms=int(tid.split("-")[0]),
            )
            for p, tid in zip(chunk, ids)
        ]

    def _enqueue_chunk(self, queue: str, chunk: List[_Prepared]) -> List[Any]:
        keys = [
            self._key(queue, "stream"),
            self._key(queue, "scheduled"),
            self._receipt(queue),
            self._key(queue, "deduplicated"),
        ]
        keys += [self._key(queue, "t:" + p.env.id) for p in chunk]
        keys += [self._key(queue, "u:" + str(p.env.unique_key)) for p in chunk if p.unique_ttl_ms]
        keys.append(self._key(queue, "events"))
        args: List[Any] = [self.receipt_ttl_ms]
        for p in chunk:
            args += [
                p.env.id,
                p.data,
                p.at_ms,
                p.delay_ms or 0,
                p.unique_ttl_ms,
                p.env.max_retry,
                "1" if p.env.discard else "0",
                fingerprint(p.env) if p.explicit else "",
                "",  # priority level
                "",  # tenant
                "0",  # last in, first out
                "",  # deduplication mode
            ]
        reply, resent = self._call(self._enqueue, keys, args)
        if not isinstance(reply, (list, tuple)) or len(reply) != 1 + len(chunk):
            raise ProducerError(f"enqueue.lua answered {reply!r} for {len(chunk)} tasks")
        now = _integer(reply[0], "enqueue.lua")
        return [self._row(queue, p, row, now, resent) for p, row in zip(chunk, reply[1:])]

    def _row(self, queue: str, p: _Prepared, row: Any, now: int, resent: bool) -> Any:
        ctx = {"queue": queue, "kind": p.env.kind, "task_id": p.env.id}
        if isinstance(row, (list, tuple)):
            code = _integer(row[0] if row else None, "enqueue.lua")
            if code == 2 and len(row) >= 3:
                # Already there: the same explicit task again, or what the first run of this
                # call wrote (a re-send answers from the receipt, which does not tell the two
                # apart: after a re-send it is taken as created by this call).
                return TaskInfo(
                    id=p.env.id,
                    queue=queue,
                    kind=p.env.kind,
                    state=_text(row[2]),
                    outcome="created" if resent else "existing",
                    run_at_ms=_integer(row[1], "enqueue.lua"),
                )
            return ProducerError(f"enqueue.lua answered an unknown row {row!r}", **ctx)
        code = _integer(row, "enqueue.lua")
        if code == 1:
            return TaskInfo(p.env.id, queue, p.env.kind, "pending", "created", now)
        if code == 3:
            at = p.at_ms if p.at_ms else now + (p.delay_ms or 0)
            return TaskInfo(p.env.id, queue, p.env.kind, "scheduled", "created", at)
        if code == -1:
            return DuplicateTask(
                f"a task of kind {p.env.kind!r} with the same payload holds the unique lock "
                f"of queue {queue!r}; nothing written",
                **ctx,
            )
        if code == -2:
            return TaskIdConflict(
                f"task id {p.env.id!r} in queue {queue!r} holds a different task; nothing "
                "written",
                **ctx,
            )
        if code == -3:
            return ProducerError(
                f"the stream or scheduled set of queue {queue!r} has the wrong type; nothing "
                "written",
                **ctx,
            )
        return ProducerError(f"enqueue.lua answered an unknown code {code}", **ctx)


def _with(e: EnqueueError, **ctx: Any) -> EnqueueError:
    for k, v in ctx.items():
        if getattr(e, k, None) is None:
            setattr(e, k, v)
    return e


def _unexpected(e: Exception, task: Any, default_queue: str) -> EnqueueError:
    """A task whose validation or encoding raised something other than an EnqueueError (a
    payload whose own methods raise, a value of a type no check expected): answered for that
    task as invalid, since nothing of it was sent."""

    def field_of(name: str) -> Optional[str]:
        try:
            v = getattr(task, name, None)
        except Exception:  # noqa: BLE001 - a task object whose attributes raise
            return None
        return v if isinstance(v, str) else None

    queue, kind, task_id = field_of("queue"), field_of("kind"), field_of("id")
    try:
        detail = f"{type(e).__name__}: {e}"
    except Exception:  # noqa: BLE001 - an exception whose own str() raises
        detail = type(e).__name__
    err = InvalidOption(
        f"the task could not be validated or encoded: {detail}",
        queue=queue if queue is not None else default_queue,
        kind=kind,
        task_id=task_id,
    )
    err.__cause__ = e
    return err


def _for_task(e: EnqueueError, p: _Prepared) -> EnqueueError:
    """A copy of a call-wide error naming one task of the call."""
    err = type(e)(e.message, queue=p.queue, kind=p.env.kind, task_id=p.env.id or None)
    err.__cause__ = e.__cause__
    return err
