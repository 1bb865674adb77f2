"""The task envelope of producer contract v1, byte for byte (CONTRACT.md section 2), and the
values derived from it (section 4).

A hand-written MessagePack writer for exactly the types the envelope uses: no dependency. It
writes every integer in its smallest form, strings as fixstr/str8/str16/str32, the payload as
bin8/bin16/bin32 and the headers sorted bytewise by key, so the same fields give the same
bytes as the Rust producer (checked against ``v1/envelopes.json``).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from typing import Dict, Optional

#: The envelope's version byte (contract v1).
VERSION = 0x01
#: Retries after the first attempt when the producer does not say.
DEFAULT_MAX_RETRY = 25

_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1
_I64_MIN = -(1 << 63)
_I128_MIN = -(1 << 127)


def _int(out: bytearray, n: int) -> None:
    """An integer in its smallest MessagePack form (unsigned when n >= 0)."""
    if n >= 0:
        if n <= 0x7F:
            out.append(n)
        elif n <= 0xFF:
            out += b"\xcc" + struct.pack(">B", n)
        elif n <= 0xFFFF:
            out += b"\xcd" + struct.pack(">H", n)
        elif n <= _U32_MAX:
            out += b"\xce" + struct.pack(">I", n)
        elif n <= _U64_MAX:
            out += b"\xcf" + struct.pack(">Q", n)
        else:
            raise OverflowError(f"integer {n} does not fit in 64 bits")
    elif n >= -32:
        out += struct.pack(">b", n)
    elif n >= -0x80:
        out += b"\xd0" + struct.pack(">b", n)
    elif n >= -0x8000:
        out += b"\xd1" + struct.pack(">h", n)
    elif n >= -0x80000000:
        out += b"\xd2" + struct.pack(">i", n)
    elif n >= _I64_MIN:
        out += b"\xd3" + struct.pack(">q", n)
    else:
        raise OverflowError(f"integer {n} does not fit in 64 bits")


def _str(out: bytearray, s: str) -> None:
    b = s.encode("utf-8")
    n = len(b)
    if n <= 31:
        out.append(0xA0 | n)
    elif n <= 0xFF:
        out += b"\xd9" + struct.pack(">B", n)
    elif n <= 0xFFFF:
        out += b"\xda" + struct.pack(">H", n)
    elif n <= _U32_MAX:
        out += b"\xdb" + struct.pack(">I", n)
    else:
        raise OverflowError("string longer than 4 GiB")
    out += b


def _bin(out: bytearray, b: bytes) -> None:
    n = len(b)
    if n <= 0xFF:
        out += b"\xc4" + struct.pack(">B", n)
    elif n <= 0xFFFF:
        out += b"\xc5" + struct.pack(">H", n)
    elif n <= _U32_MAX:
        out += b"\xc6" + struct.pack(">I", n)
    else:
        raise OverflowError("payload longer than 4 GiB")
    out += b


def _map_header(out: bytearray, n: int) -> None:
    if n <= 15:
        out.append(0x80 | n)
    elif n <= 0xFFFF:
        out += b"\xde" + struct.pack(">H", n)
    else:
        out += b"\xdf" + struct.pack(">I", n)


def _opt_int(out: bytearray, n: Optional[int]) -> None:
    if n is None:
        out.append(0xC0)
    else:
        _int(out, n)


@dataclass
class Envelope:
    """The 15 values a v1 producer writes (``retried``, ``last_error`` and
    ``last_failed_at_ms`` are always 0, nil, nil and are not fields here)."""

    id: str
    kind: str
    queue: str
    payload: bytes
    enqueued_at_ms: int
    max_retry: int = DEFAULT_MAX_RETRY
    timeout_ms: Optional[int] = None
    deadline_ms: Optional[int] = None
    unique_key: Optional[str] = None
    retention_ms: Optional[int] = None
    discard: bool = False
    headers: Dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The exact stored bytes: the version byte, then a MessagePack array of 15 values.

        Raises OverflowError when a number does not fit its MessagePack type (unsigned
        fields below 0 included)."""
        for name in ("max_retry", "timeout_ms", "retention_ms"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise OverflowError(f"{name} must not be negative (got {v})")
        if self.max_retry > _U32_MAX:
            raise OverflowError(f"max_retry must fit in 32 bits (got {self.max_retry})")
        out = bytearray([VERSION, 0x9F])  # version, fixarray of 15
        _str(out, self.id)
        _str(out, self.kind)
        _str(out, self.queue)
        _bin(out, bytes(self.payload))
        _int(out, 0)  # retried
        _int(out, self.max_retry)
        _opt_int(out, self.timeout_ms)
        _opt_int(out, self.deadline_ms)
        if self.unique_key is None:
            out.append(0xC0)
        else:
            _str(out, self.unique_key)
        _opt_int(out, self.retention_ms)
        _str(out, "Discard" if self.discard else "Archive")
        _int(out, self.enqueued_at_ms)
        out.append(0xC0)  # last_error
        out.append(0xC0)  # last_failed_at_ms
        items = sorted(
            ((k.encode("utf-8"), k, v) for k, v in self.headers.items()), key=lambda t: t[0]
        )
        _map_header(out, len(items))
        for _, k, v in items:
            _str(out, k)
            _str(out, v)
        return bytes(out)


def unique_key(queue: str, kind: str, payload: bytes) -> str:
    """A unique task's key: hex of SHA-256 over ``queue 0x00 kind 0x00 payload``."""
    h = hashlib.sha256()
    h.update(queue.encode("utf-8"))
    h.update(b"\x00")
    h.update(kind.encode("utf-8"))
    h.update(b"\x00")
    h.update(payload)
    return h.hexdigest()


def fingerprint(env: Envelope) -> str:
    """What an explicit id's task is (CONTRACT.md section 4): the first 16 bytes, hex, of
    SHA-256 over kind, payload, max retry, timeout, deadline, retention, unique key and the
    dead-letter policy. Not the clock or the headers."""
    h = hashlib.sha256()
    for part in (env.kind.encode("utf-8"), bytes(env.payload)):
        h.update(struct.pack("<Q", len(part)))
        h.update(part)
    h.update(struct.pack("<I", env.max_retry))
    h.update(_i128le(-1 if env.timeout_ms is None else env.timeout_ms))
    h.update(_i128le(_I128_MIN if env.deadline_ms is None else env.deadline_ms))
    h.update(_i128le(-1 if env.retention_ms is None else env.retention_ms))
    h.update((env.unique_key or "").encode("utf-8"))
    h.update(bytes([0, 1 if env.discard else 0]))
    return h.digest()[:16].hex()


def _i128le(n: int) -> bytes:
    return n.to_bytes(16, "little", signed=True)
