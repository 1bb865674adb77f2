/**
 * The task envelope of producer contract v1, byte for byte (CONTRACT.md section 2), and the
 * values derived from it (section 4).
 *
 * A hand-written MessagePack writer for exactly the types the envelope uses, so the producer
 * needs no MessagePack library: every integer in its smallest form, strings as
 * fixstr/str8/str16/str32, the payload as bin8/bin16/bin32, headers sorted bytewise by key.
 * The same fields give the same bytes as the Rust producer (checked against
 * `v1/envelopes.json`).
 */
import { createHash } from "node:crypto";

/** The envelope's version byte (contract v1). */
export const VERSION = 0x01;
/** Retries after the first attempt when the producer does not say. */
export const DEFAULT_MAX_RETRY = 25;

const U32_MAX = 0xffffffffn;
const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I128_MIN = -(1n << 127n);

/** The 15 values a v1 producer writes (`retried`, `last_error` and `last_failed_at_ms` are
 * always 0, nil and nil, and are not fields here). Integers are bigint so that every unix ms
 * and every 64-bit value is exact. */
export interface Envelope {
  id: string;
  kind: string;
  queue: string;
  payload: Uint8Array;
  enqueuedAtMs: bigint;
  maxRetry: bigint;
  timeoutMs: bigint | null;
  deadlineMs: bigint | null;
  uniqueKey: string | null;
  retentionMs: bigint | null;
  discard: boolean;
  headers: Record<string, string>;
}

/** A value that does not fit the MessagePack type its field has. */
export class EnvelopeRangeError extends RangeError {}

class Writer {
  private parts: Buffer[] = [];

  byte(b: number): void {
    this.parts.push(Buffer.from([b]));
  }

  bytes(b: Uint8Array): void {
    this.parts.push(Buffer.from(b));
  }

  head(marker: number, n: number, width: 1 | 2 | 4): void {
    const b = Buffer.alloc(1 + width);
    b[0] = marker;
    if (width === 1) b.writeUInt8(n, 1);
    else if (width === 2) b.writeUInt16BE(n, 1);
    else b.writeUInt32BE(n, 1);
    this.parts.push(b);
  }

  int(n: bigint): void {
    const b = Buffer.alloc(9);
    if (n >= 0n) {
      if (n <= 0x7fn) return this.byte(Number(n));
      if (n <= 0xffn) return this.head(0xcc, Number(n), 1);
      if (n <= 0xffffn) return this.head(0xcd, Number(n), 2);
      if (n <= U32_MAX) return this.head(0xce, Number(n), 4);
      if (n > U64_MAX) throw new EnvelopeRangeError(`integer ${n} does not fit in 64 bits`);
      b[0] = 0xcf;
      b.writeBigUInt64BE(n, 1);
      return this.bytes(b);
    }
    if (n >= -32n) return this.byte(Number(n) & 0xff);
    if (n >= -0x80n) {
      this.byte(0xd0);
      return this.byte(Number(n) & 0xff);
    }
    if (n >= -0x8000n) {
      const s = Buffer.alloc(3);
      s[0] = 0xd1;
      s.writeInt16BE(Number(n), 1);
      return this.bytes(s);
    }
    if (n >= -0x80000000n) {
      const s = Buffer.alloc(5);
      s[0] = 0xd2;
      s.writeInt32BE(Number(n), 1);
      return this.bytes(s);
    }
    if (n < I64_MIN) throw new EnvelopeRangeError(`integer ${n} does not fit in 64 bits`);
    b[0] = 0xd3;
    b.writeBigInt64BE(n, 1);
    this.bytes(b);
  }

  optInt(n: bigint | null): void {
    if (n === null) this.byte(0xc0);
    else this.int(n);
  }

  str(s: string): void {
    const b = Buffer.from(s, "utf8");
    const n = b.length;
    if (n <= 31) this.byte(0xa0 | n);
    else if (n <= 0xff) this.head(0xd9, n, 1);
    else if (n <= 0xffff) this.head(0xda, n, 2);
    else if (n <= 0xffffffff) this.head(0xdb, n, 4);
    else throw new EnvelopeRangeError("string longer than 4 GiB");
    this.bytes(b);
  }

  bin(b: Uint8Array): void {
    const n = b.length;
    if (n <= 0xff) this.head(0xc4, n, 1);
    else if (n <= 0xffff) this.head(0xc5, n, 2);
    else if (n <= 0xffffffff) this.head(0xc6, n, 4);
    else throw new EnvelopeRangeError("payload longer than 4 GiB");
    this.bytes(b);
  }

  mapHead(n: number): void {
    if (n <= 15) this.byte(0x80 | n);
    else if (n <= 0xffff) this.head(0xde, n, 2);
    else this.head(0xdf, n, 4);
  }

  done(): Buffer {
    return Buffer.concat(this.parts);
  }
}

/** The exact stored bytes of `env`: the version byte, then a MessagePack array of 15 values.
 * Throws {@link EnvelopeRangeError} when a number does not fit its field. */
export function encodeEnvelope(env: Envelope): Buffer {
  for (const [name, v] of [
    ["maxRetry", env.maxRetry],
    ["timeoutMs", env.timeoutMs],
    ["retentionMs", env.retentionMs],
  ] as const) {
    if (v !== null && v < 0n) throw new EnvelopeRangeError(`${name} must not be negative (got ${v})`);
  }
  if (env.maxRetry > U32_MAX) throw new EnvelopeRangeError(`maxRetry must fit in 32 bits`);
  const w = new Writer();
  w.byte(VERSION);
  w.byte(0x9f); // fixarray of 15
  w.str(env.id);
  w.str(env.kind);
  w.str(env.queue);
  w.bin(env.payload);
  w.int(0n); // retried
  w.int(env.maxRetry);
  w.optInt(env.timeoutMs);
  w.optInt(env.deadlineMs);
  if (env.uniqueKey === null) w.byte(0xc0);
  else w.str(env.uniqueKey);
  w.optInt(env.retentionMs);
  w.str(env.discard ? "Discard" : "Archive");
  w.int(env.enqueuedAtMs);
  w.byte(0xc0); // last_error
  w.byte(0xc0); // last_failed_at_ms
  const entries = Object.entries(env.headers).sort(([a], [b]) =>
    Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8")),
  );
  w.mapHead(entries.length);
  for (const [k, v] of entries) {
    w.str(k);
    w.str(v);
  }
  return w.done();
}

/** A unique task's key: hex of SHA-256 over `queue 0x00 kind 0x00 payload`. */
export function uniqueKey(queue: string, kind: string, payload: Uint8Array): string {
  return createHash("sha256")
    .update(Buffer.from(queue, "utf8"))
    .update(Buffer.from([0]))
    .update(Buffer.from(kind, "utf8"))
    .update(Buffer.from([0]))
    .update(payload)
    .digest("hex");
}

function i128le(n: bigint): Buffer {
  const b = Buffer.alloc(16);
  let v = BigInt.asUintN(128, n);
  for (let i = 0; i < 16; i++) {
    b[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return b;
}

/** What an explicit id's task is (CONTRACT.md section 4): the first 16 bytes, hex, of SHA-256
 * over kind, payload, max retry, timeout, deadline, retention, unique key and the dead-letter
 * policy. Not the clock or the headers. */
export function fingerprint(env: Envelope): string {
  const h = createHash("sha256");
  for (const part of [Buffer.from(env.kind, "utf8"), Buffer.from(env.payload)]) {
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(part.length));
    h.update(len).update(part);
  }
  const mr = Buffer.alloc(4);
  mr.writeUInt32LE(Number(env.maxRetry));
  h.update(mr);
  h.update(i128le(env.timeoutMs ?? -1n));
  h.update(i128le(env.deadlineMs ?? I128_MIN));
  h.update(i128le(env.retentionMs ?? -1n));
  h.update(Buffer.from(env.uniqueKey ?? "", "utf8"));
  h.update(Buffer.from([0, env.discard ? 1 : 0]));
  return h.digest().subarray(0, 16).toString("hex");
}
