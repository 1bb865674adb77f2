"""The producer against a real Redis: what each kind of task leaves there, the errors, and a
lost reply re-sent through a proxy that drops it.

Redis: ``CHRONOS_REDIS_URL`` when set, else a ``redis-server`` started for this module. Each
test uses a namespace of its own, so the tests can share a Redis with others.
"""

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import List, Optional

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from chronos_producer import (
    PRODUCER_NAME,
    ConnectionLost,
    DuplicateTask,
    EnqueueError,
    InvalidOption,
    InvalidQueue,
    InvalidTaskId,
    PayloadTooLarge,
    Producer,
    Task,
    TaskIdConflict,
    TaskInfo,
    ValidationError,
)

REDIS_URL: Optional[str] = None
_server: Optional[subprocess.Popen] = None
_workdir: Optional[str] = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setUpModule() -> None:
    global REDIS_URL, _server, _workdir
    REDIS_URL = os.environ.get("CHRONOS_REDIS_URL")
    if REDIS_URL:
        return
    server = shutil.which("redis-server")
    if not server:
        raise unittest.SkipTest("no CHRONOS_REDIS_URL and no redis-server on PATH")
    port = _free_port()
    _workdir = tempfile.mkdtemp(prefix="chronos-py-redis-")
    _server = subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", _workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    REDIS_URL = f"redis://127.0.0.1:{port}"
    client = redis.Redis.from_url(REDIS_URL)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or _server.poll() is not None:
                tearDownModule()
                raise
            time.sleep(0.05)
    client.close()


def tearDownModule() -> None:
    global _server
    if _server is not None:
        _server.terminate()
        try:
            _server.wait(5)
        except subprocess.TimeoutExpired:
            _server.kill()
            _server.wait()
        _server = None
    if _workdir:
        shutil.rmtree(_workdir, ignore_errors=True)


def decode_envelope(b: bytes) -> list:
    """A minimal MessagePack reader, enough for envelopes (tests only)."""
    assert b[0] == 1, "version byte"
    pos = 1

    def take(n: int) -> bytes:
        nonlocal pos
        out = b[pos : pos + n]
        pos += n
        return out

    def uint(n: int) -> int:
        return int.from_bytes(take(n), "big")

    def read():
        t = take(1)[0]
        if t <= 0x7F:
            return t
        if t >= 0xE0:
            return t - 0x100
        if 0xA0 <= t <= 0xBF:
            return take(t - 0xA0).decode()
        if 0x90 <= t <= 0x9F:
            return [read() for _ in range(t - 0x90)]
        if 0x80 <= t <= 0x8F:
            return {read(): read() for _ in range(t - 0x80)}
        if t == 0xC0:
            return None
        if t in (0xC4, 0xC5, 0xC6):
            return take(uint({0xC4: 1, 0xC5: 2, 0xC6: 4}[t]))
        if t in (0xD9, 0xDA, 0xDB):
            return take(uint({0xD9: 1, 0xDA: 2, 0xDB: 4}[t])).decode()
        if t in (0xCC, 0xCD, 0xCE, 0xCF):
            return uint({0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}[t])
        if t in (0xD0, 0xD1, 0xD2, 0xD3):
            n = {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}[t]
            return int.from_bytes(take(n), "big", signed=True)
        raise ValueError(f"type byte {t:#x}")

    value = read()
    assert pos == len(b), "trailing bytes"
    return value


class Base(unittest.TestCase):
    def setUp(self) -> None:
        self.r = redis.Redis.from_url(REDIS_URL)
        self.ns = "chronos-py-test-" + secrets.token_hex(6)
        self.p = Producer(self.r, namespace=self.ns)

    def tearDown(self) -> None:
        keys = list(self.r.scan_iter(match=self.ns + ":*", count=1000))
        if keys:
            self.r.delete(*keys)
        self.r.close()

    def key(self, queue: str, name: str) -> str:
        return f"{self.ns}:{{{queue}}}:{name}"

    def stream(self, queue: str = "default") -> list:
        return self.r.xrange(self.key(queue, "stream"))

    def records(self, queue: str = "default") -> List[bytes]:
        return list(self.r.scan_iter(match=self.key(queue, "t:*"), count=1000))

    def written(self) -> List[bytes]:
        """Every key of the namespace but the registration and receipts."""
        return sorted(
            k
            for k in self.r.scan_iter(match=self.ns + ":*", count=1000)
            if b":e:" not in k and not k.endswith(b":queues") and not k.endswith(b":stream")
        )


class Enqueue(Base):
    def test_plain_enqueue_is_one_stream_entry_holding_the_envelope_and_no_record(self):
        info = self.p.enqueue("email:send", {"to": "ada@example.com"})
        self.assertIsInstance(info, TaskInfo)
        self.assertRegex(info.id, r"\A\d+-\d+\Z")
        self.assertEqual(
            (info.queue, info.kind, info.state, info.outcome),
            ("default", "email:send", "pending", "created"),
        )
        self.assertEqual(info.run_at_ms, int(info.id.split("-")[0]))
        entries = self.stream()
        self.assertEqual(len(entries), 1)
        entry_id, fields = entries[0]
        self.assertEqual(entry_id.decode(), info.id)
        self.assertEqual(set(fields), {b"e"})
        env = decode_envelope(fields[b"e"])
        self.assertEqual(len(env), 15)
        self.assertEqual(env[:6], ["", "email:send", "default", b'{"to":"ada@example.com"}', 0, 25])
        self.assertEqual(env[10], "Archive")
        self.assertEqual(
            env[14], {"chronos-codec": "json", "chronos-producer": PRODUCER_NAME}
        )
        self.assertEqual(self.records(), [])
        self.assertEqual(self.written(), [])
        # Registered: the group exists and the queue is listed.
        groups = self.r.xinfo_groups(self.key("default", "stream"))
        self.assertEqual([g["name"] for g in groups], [b"workers"])
        self.assertEqual(self.r.smembers(self.ns + ":queues"), {b"default"})

    def test_a_plain_batch_gets_consecutive_ids(self):
        infos = self.p.enqueue_batch([Task("k", {"n": i}) for i in range(5)], queue="q1")
        ids = [i.id for i in infos]
        ms = {i.split("-")[0] for i in ids}
        self.assertEqual(len(ms), 1)
        seqs = [int(i.split("-")[1]) for i in ids]
        self.assertEqual(seqs, list(range(seqs[0], seqs[0] + 5)))
        self.assertEqual([e[0].decode() for e in self.stream("q1")], ids)
        payloads = [decode_envelope(e[1][b"e"])[3] for e in self.stream("q1")]
        self.assertEqual(payloads, [f'{{"n":{i}}}'.encode() for i in range(5)])

    def test_a_plain_task_with_a_policy_carries_it_on_its_entry(self):
        info = self.p.enqueue("k", 1, max_retry=3, discard=True)
        (entry_id, fields), = self.stream()
        self.assertEqual(entry_id.decode(), info.id)
        self.assertEqual(fields[b"x"], b"3")
        self.assertEqual(fields[b"dl"], b"1")
        env = decode_envelope(fields[b"e"])
        self.assertEqual((env[5], env[10]), (3, "Discard"))

    def test_a_delayed_task_waits_in_the_scheduled_set_with_a_record(self):
        t0 = int(time.time() * 1000)
        info = self.p.enqueue("k", {"n": 1}, process_in=timedelta(seconds=60))
        self.assertRegex(info.id, r"\A[0-9a-f]{32}\Z")
        self.assertEqual((info.state, info.outcome), ("scheduled", "created"))
        self.assertGreaterEqual(info.run_at_ms, t0 + 59_000)
        self.assertEqual(self.stream(), [])
        score = self.r.zscore(self.key("default", "scheduled"), info.id)
        self.assertIsNotNone(score)
        self.assertAlmostEqual(score, info.run_at_ms, delta=2000)
        rec = self.r.hgetall(self.key("default", "t:" + info.id))
        self.assertEqual(rec[b"s"], b"scheduled")
        env = decode_envelope(rec[b"e"])
        self.assertEqual((env[0], env[1], env[3]), (info.id, "k", b'{"n":1}'))

    def test_process_at_a_datetime_or_in_the_past(self):
        at = datetime.now(timezone.utc) + timedelta(hours=1)
        info = self.p.enqueue("k", 1, process_at=at)
        self.assertEqual(info.state, "scheduled")
        self.assertEqual(info.run_at_ms, int(at.timestamp() * 1000))
        past = self.p.enqueue("k", 2, process_at=1000)
        self.assertEqual(past.state, "pending")
        self.assertTrue(self.r.exists(self.key("default", "t:" + past.id)))
        self.assertEqual(len(self.stream()), 1)

    def test_an_explicit_id_is_idempotent_and_conflicts_with_another_task(self):
        first = self.p.enqueue("order:ship", {"order": 17}, id="order-17", max_retry=3)
        self.assertEqual((first.id, first.state, first.outcome), ("order-17", "pending", "created"))
        again = self.p.enqueue("order:ship", {"order": 17}, id="order-17", max_retry=3,
                               headers={"traceparent": "other"})
        self.assertEqual((again.id, again.outcome), ("order-17", "existing"))
        self.assertEqual(again.state, "pending")
        self.assertEqual(len(self.stream()), 1)
        rec = self.r.hgetall(self.key("default", "t:order-17"))
        self.assertEqual(rec[b"s"], b"pending")
        with self.assertRaises(TaskIdConflict) as cm:
            self.p.enqueue("order:ship", {"order": 18}, id="order-17", max_retry=3)
        self.assertEqual(cm.exception.task_id, "order-17")
        self.assertIn("order-17", str(cm.exception))
        with self.assertRaises(TaskIdConflict):
            self.p.enqueue("order:ship", {"order": 17}, id="order-17", max_retry=4)
        self.assertEqual(len(self.stream()), 1)

    def test_a_unique_task_refuses_a_duplicate_while_its_lock_lives(self):
        first = self.p.enqueue("report:build", {"day": 1}, unique_ttl=60_000)
        (_, fields), = self.stream()
        env = decode_envelope(fields[b"e"])
        self.assertEqual(fields[b"i"].decode(), first.id)
        lock = self.key("default", "u:" + env[8])
        self.assertEqual(self.r.get(lock).decode(), first.id)
        self.assertGreater(self.r.pttl(lock), 50_000)
        self.assertEqual(len(list(self.r.scan_iter(match=self.key("default", "u:*")))), 1)
        with self.assertRaises(DuplicateTask):
            self.p.enqueue("report:build", {"day": 1}, unique_ttl=timedelta(minutes=1))
        other = self.p.enqueue("report:build", {"day": 2}, unique_ttl=60_000)
        self.assertNotEqual(other.id, first.id)
        self.assertEqual(len(self.records()), 2)

    def test_retention_timeout_deadline_and_headers_travel_in_the_envelope(self):
        deadline = datetime(2100, 1, 1, tzinfo=timezone.utc)
        info = self.p.enqueue(
            "k", {"n": 11}, retention=timedelta(hours=1), timeout=5000, deadline=deadline,
            max_retry=0, headers={"x-request-id": "r-11", "chronos-codec": "msgpack"},
        )
        self.assertEqual(info.state, "pending")
        self.assertTrue(self.r.exists(self.key("default", "t:" + info.id)))
        (_, fields), = self.stream()
        env = decode_envelope(fields[b"e"])
        self.assertEqual(env[0], info.id)
        self.assertEqual((env[5], env[6], env[7], env[9]), (0, 5000, 4102444800000, 3600000))
        self.assertEqual(env[14]["x-request-id"], "r-11")
        self.assertEqual(env[14]["chronos-codec"], "json", "the payload is JSON whatever is asked")

    def test_a_mixed_batch_makes_both_calls_and_answers_in_order(self):
        results = self.p.enqueue_batch(
            [
                Task("k", {"n": 12}),
                Task("k", {"n": 13}, id="order-13"),
                Task("k", {"n": 14}, process_in=1500),
                Task("k", {"n": 15}, queue="other"),
                Task("k", {"n": 16}, queue="bad queue"),
                Task("k", {"n": 17}),
            ]
        )
        self.assertRegex(results[0].id, r"\A\d+-\d+\Z")
        self.assertEqual(results[1].id, "order-13")
        self.assertEqual(results[2].state, "scheduled")
        self.assertEqual(results[3].queue, "other")
        self.assertIsInstance(results[4], InvalidQueue)
        self.assertRegex(results[5].id, r"\A\d+-\d+\Z")
        ms0, seq0 = results[0].id.split("-")
        self.assertEqual(results[5].id, f"{ms0}-{int(seq0) + 1}")
        self.assertEqual(len(self.stream()), 3)
        self.assertEqual(len(self.stream("other")), 1)
        self.assertEqual(self.r.smembers(self.ns + ":queues"), {b"default", b"other"})

    def test_large_batches_are_split_into_calls(self):
        plain = self.p.enqueue_batch([Task("k", i) for i in range(620)])
        self.assertTrue(all(isinstance(r, TaskInfo) for r in plain))
        self.assertEqual(len({r.id for r in plain}), 620)
        self.assertEqual(self.r.xlen(self.key("default", "stream")), 620)
        full = self.p.enqueue_batch([Task("k", i, retention=1000) for i in range(130)])
        self.assertTrue(all(isinstance(r, TaskInfo) for r in full))
        self.assertEqual(len(self.records()), 130)
        self.assertEqual(self.r.xlen(self.key("default", "stream")), 750)

    def test_validation_errors_write_nothing(self):
        cases = [
            (InvalidQueue, dict(queue="")),
            (InvalidQueue, dict(queue="a{b}")),
            (InvalidQueue, dict(queue="a b")),
            (InvalidQueue, dict(queue="q" * 129)),
            (InvalidTaskId, dict(id="")),
            (InvalidTaskId, dict(id="12-34")),
            (InvalidTaskId, dict(id="has space")),
            (InvalidTaskId, dict(id="tab\there")),
            (InvalidTaskId, dict(id="x" * 257)),
            (InvalidOption, dict(process_in=-1)),
            (InvalidOption, dict(process_in=1.5)),
            (InvalidOption, dict(unique_ttl=0)),
            (InvalidOption, dict(max_retry=-1)),
            (InvalidOption, dict(max_retry=1 << 32)),
            (InvalidOption, dict(process_in=1, process_at=2)),
            (InvalidOption, dict(headers={"a": 1})),
        ]
        for cls, kw in cases:
            with self.subTest(**{k: repr(v)[:20] for k, v in kw.items()}):
                with self.assertRaises(cls) as cm:
                    self.p.enqueue("k", {"n": 1}, **kw)
                self.assertIsInstance(cm.exception, ValidationError)
                self.assertTrue(str(cm.exception))
        with self.assertRaises(InvalidOption):
            self.p.enqueue("k", {"n": float("nan")})
        with self.assertRaises(InvalidOption):
            self.p.enqueue("k", object())
        with self.assertRaises(InvalidOption):
            self.p.enqueue("", 1)
        small = Producer(self.r, namespace=self.ns, max_payload=10)
        with self.assertRaises(PayloadTooLarge) as cm:
            small.enqueue("k", "0123456789")
        self.assertIn("12 bytes", str(cm.exception))
        # Not even the queue was registered.
        self.assertEqual(list(self.r.scan_iter(match=self.ns + ":*")), [])
        self.assertIsInstance(small.enqueue("k", "01234567"), TaskInfo)
        # In a batch an invalid task is answered, and the others still go.
        results = self.p.enqueue_batch([Task("k", 1, id="1-1"), Task("k", 2)], queue="v")
        self.assertIsInstance(results[0], InvalidTaskId)
        self.assertIsInstance(results[1], TaskInfo)
        self.assertEqual(len(self.stream("v")), 1)

    def test_a_payload_nested_too_deep_is_a_validation_error_not_a_recursion_error(self):
        deep: list = []
        for _ in range(100_000):
            deep = [deep]
        with self.assertRaises(InvalidOption) as cm:
            self.p.enqueue("k", deep, queue="deep")
        self.assertIn("nested too deep", str(cm.exception))
        self.assertEqual((cm.exception.queue, cm.exception.kind), ("deep", "k"))
        results = self.p.enqueue_batch([Task("k", deep), Task("k", 1)], queue="deep")
        self.assertIsInstance(results[0], InvalidOption)
        self.assertIsInstance(results[1], TaskInfo)
        self.assertEqual(len(self.stream("deep")), 1)

    def test_a_batch_answers_any_exception_from_a_task_for_that_task_and_sends_the_rest(self):
        class Exploding(dict):
            def items(self):
                raise RuntimeError("boom from items")

        class BadHeaders(dict):
            def items(self):
                raise KeyError("boom from headers")

        results = self.p.enqueue_batch(
            [
                Task("k", Exploding(a=1)),
                Task("k", 2, headers=BadHeaders(a="b"), id="with-headers"),
                Task("k", 3),
                Task("k", 4, retention=1000),
            ],
            queue="mixed",
        )
        for bad, cause in ((results[0], RuntimeError), (results[1], KeyError)):
            self.assertIsInstance(bad, InvalidOption)
            self.assertIsInstance(bad, ValidationError)
            self.assertIsInstance(bad.__cause__, cause)
            self.assertEqual((bad.queue, bad.kind), ("mixed", "k"))
        self.assertIn("boom from items", str(results[0]))
        self.assertEqual(results[1].task_id, "with-headers")
        self.assertIsInstance(results[2], TaskInfo)
        self.assertIsInstance(results[3], TaskInfo)
        self.assertEqual(len(self.stream("mixed")), 2)
        with self.assertRaises(InvalidOption):
            self.p.enqueue("k", Exploding(a=1))

    def test_a_bad_namespace_is_refused(self):
        with self.assertRaises(ValueError):
            Producer(self.r, namespace="a}b")

    def test_a_script_missing_from_the_cache_is_loaded(self):
        # A copy of the scripts with a comment of this test's own: a sha Redis has never seen,
        # so the first EVALSHA meets NOSCRIPT (without flushing a shared script cache).
        src = Path(__file__).resolve().parents[2] / "chronos-protocol" / "contract" / "v1"
        with tempfile.TemporaryDirectory() as d:
            for name in ("push.lua", "enqueue.lua"):
                text = (src / name).read_bytes() + f"\n-- {self.ns}\n".encode()
                Path(d, name).write_bytes(text)
            p = Producer(self.r, namespace=self.ns, scripts_dir=d)
            self.assertEqual(self.r.script_exists(p._push.sha), [False])
            self.assertEqual(p.enqueue("k", 1).state, "pending")
            self.assertEqual(p.enqueue("k", 2, retention=10).state, "pending")
            self.assertEqual(self.r.script_exists(p._push.sha, p._enqueue.sha), [True, True])
        self.assertEqual(len(self.stream()), 2)

    def test_a_client_that_decodes_responses_works_too(self):
        r = redis.Redis.from_url(REDIS_URL, decode_responses=True)
        try:
            p = Producer(r, namespace=self.ns)
            self.assertRegex(p.enqueue("k", 1).id, r"\A\d+-\d+\Z")
            self.assertEqual(p.enqueue("k", 1, id="x-1").outcome, "created")
            info = p.enqueue("k", 1, id="x-1")
            self.assertEqual((info.outcome, info.state), ("existing", "pending"))
        finally:
            r.close()

    def test_a_queue_is_registered_once_per_producer(self):
        self.p.enqueue("k", 1, queue="once")
        self.r.srem(self.ns + ":queues", "once")
        self.p.enqueue("k", 2, queue="once")
        self.assertEqual(self.r.smembers(self.ns + ":queues"), set())
        Producer(self.r, namespace=self.ns).enqueue("k", 3, queue="once")
        self.assertEqual(self.r.smembers(self.ns + ":queues"), {b"once"})


class DropProxy:
    """A TCP proxy to Redis that forwards everything, except that it answers the first
    ``drops`` EVALSHA calls (those that ran: a NOSCRIPT answer passes) by closing the client's
    connection instead of handing back the reply. The call ran in Redis; its reply is lost."""

    def __init__(self, host: str, port: int, drops: int = 1) -> None:
        self.upstream = (host, port)
        self.drops = drops
        self.evalshas = 0
        self.dropped = 0
        self.lock = threading.Lock()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.closed = False
        self.sockets: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            state = {"armed": False}
            threading.Thread(target=self._up, args=(client, server, state), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, state), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, state: dict) -> None:
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                if b"\r\nEVALSHA\r\n" in data.upper():
                    with self.lock:
                        self.evalshas += 1
                        if self.dropped < self.drops:
                            state["armed"] = True
                server.sendall(data)
        except OSError:
            pass
        finally:
            _close(server)

    def _down(self, server: socket.socket, client: socket.socket, state: dict) -> None:
        try:
            while True:
                data = server.recv(65536)
                if not data:
                    break
                if state["armed"]:
                    state["armed"] = False
                    if not data.startswith(b"-NOSCRIPT"):
                        with self.lock:
                            self.dropped += 1
                        break  # the reply is lost: the client's connection is cut
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)
            _close(server)

    def close(self) -> None:
        self.closed = True
        _close(self.listener)
        for s in self.sockets:
            _close(s)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


class LostReply(Base):
    """A reply lost after the script ran: the producer re-sends the same call (same receipt),
    which answers what the first run did without writing again."""

    def proxied(self, drops: int = 1, **kw) -> "tuple[DropProxy, Producer, redis.Redis]":
        pool_kw = self.r.connection_pool.connection_kwargs
        proxy = DropProxy(pool_kw.get("host", "127.0.0.1"), pool_kw.get("port", 6379), drops)
        self.addCleanup(proxy.close)
        # redis-py's own retries are off, so the re-send tested is the producer's.
        client = redis.Redis(
            host="127.0.0.1",
            port=proxy.port,
            db=pool_kw.get("db", 0),
            username=pool_kw.get("username"),
            password=pool_kw.get("password"),
            socket_timeout=5,
            retry=Retry(NoBackoff(), 0),
        )
        self.addCleanup(client.close)
        kw.setdefault("resend_backoff", 0.01)
        return proxy, Producer(client, namespace=self.ns, **kw), client

    def test_a_lost_plain_reply_resent_does_not_duplicate(self):
        proxy, p, _ = self.proxied()
        info = p.enqueue("email:send", {"to": "ada@example.com"})
        self.assertEqual(proxy.dropped, 1, "the first reply was dropped")
        self.assertGreaterEqual(proxy.evalshas, 2, "the call was re-sent")
        entries = self.stream()
        self.assertEqual(len(entries), 1, "exactly one stream entry")
        self.assertEqual(entries[0][0].decode(), info.id)
        self.assertEqual((info.state, info.outcome), ("pending", "created"))

    def test_a_lost_plain_batch_reply_resent_answers_the_same_ids(self):
        proxy, p, _ = self.proxied()
        infos = p.enqueue_batch([Task("k", i) for i in range(3)])
        self.assertEqual(proxy.dropped, 1)
        self.assertEqual([e[0].decode() for e in self.stream()], [i.id for i in infos])

    def test_a_lost_record_reply_resent_does_not_duplicate(self):
        proxy, p, _ = self.proxied()
        info = p.enqueue("k", {"n": 1}, retention=60_000)
        self.assertEqual(proxy.dropped, 1)
        self.assertGreaterEqual(proxy.evalshas, 2)
        entries = self.stream()
        self.assertEqual(len(entries), 1, "exactly one stream entry")
        self.assertEqual(self.records(), [self.key("default", "t:" + info.id).encode()])
        self.assertEqual(entries[0][1][b"i"].decode(), info.id)
        self.assertEqual((info.state, info.outcome), ("pending", "created"))

    def test_a_lost_unique_reply_resent_is_not_its_own_duplicate(self):
        proxy, p, _ = self.proxied()
        info = p.enqueue("k", {"n": 1}, unique_ttl=60_000, process_in=60_000)
        self.assertEqual(proxy.dropped, 1)
        self.assertEqual(info.state, "scheduled")
        self.assertEqual(self.r.zrange(self.key("default", "scheduled"), 0, -1),
                         [info.id.encode()])

    def test_no_resend_once_the_receipt_may_have_expired(self):
        # The first pause (1.3 s) outlives the receipt (1.1 s): a re-send would find no
        # receipt and push the task a second time.
        proxy, p, _ = self.proxied(drops=1, receipt_ttl_ms=1100, resend_backoff=1.3)
        with self.assertRaises(ConnectionLost) as cm:
            p.enqueue("k", {"n": 1})
        self.assertIn("may or may not", str(cm.exception))
        self.assertEqual(proxy.evalshas, 1, "not re-sent")
        self.assertEqual(len(self.stream()), 1, "written once, by the first send")
        # Within the receipt's life the same producer still re-sends.
        proxy.drops = 2
        quick = Producer(p.client, namespace=self.ns, resend_backoff=0.01)
        info = quick.enqueue("k", {"n": 2})
        self.assertEqual(proxy.dropped, 2)
        self.assertEqual([e[0].decode() for e in self.stream()][1:], [info.id])

    def test_redis_unreachable_after_the_resends_is_connection_lost(self):
        proxy, p, _ = self.proxied(drops=100, resends=2)
        with self.assertRaises(ConnectionLost) as cm:
            p.enqueue("k", 1)
        self.assertEqual(proxy.dropped, 3, "the first call and 2 re-sends")
        self.assertIsInstance(cm.exception, EnqueueError)
        self.assertIn("may or may not", str(cm.exception))
        self.assertEqual(len(self.stream()), 1, "every try was the same call")
        results = p.enqueue_batch([Task("k", 2), Task("k", 3, id="k-3")])
        self.assertTrue(all(isinstance(r, ConnectionLost) for r in results))
        self.assertEqual(results[1].task_id, "k-3")


if __name__ == "__main__":
    unittest.main()
