import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { Envelope, encodeEnvelope, fingerprint, uniqueKey } from "../src/envelope";

const VECTORS = path.resolve(__dirname, "..", "..", "..", "chronos-protocol", "contract", "v1", "envelopes.json");
const vectors = JSON.parse(readFileSync(VECTORS, "utf8"));

function big(v: number | null): bigint | null {
  return v === null ? null : BigInt(v);
}

/** The envelope of a vector's fields. JSON numbers above 2^53 would be inexact: the vectors
 * stay below, and the encoder takes bigint. */
function envelopeOf(f: Record<string, any>): Envelope {
  return {
    id: f.id,
    kind: f.kind,
    queue: f.queue,
    payload: Buffer.from(f.payload_hex, "hex"),
    enqueuedAtMs: BigInt(f.enqueued_at_ms),
    maxRetry: BigInt(f.max_retry),
    timeoutMs: big(f.timeout_ms),
    deadlineMs: big(f.deadline_ms),
    uniqueKey: f.unique_key,
    retentionMs: big(f.retention_ms),
    discard: f.dead_letter === "discard",
    headers: f.headers,
  };
}

test("every golden envelope is written byte for byte", () => {
  assert.ok(vectors.envelopes.length >= 5);
  for (const v of vectors.envelopes) {
    assert.equal(encodeEnvelope(envelopeOf(v.fields)).toString("hex"), v.hex, v.name);
  }
});

test("headers are written sorted bytewise whatever their order", () => {
  const f = vectors.envelopes[2].fields;
  const reversed = Object.fromEntries(Object.entries(f.headers as Record<string, string>).reverse());
  const env = { ...envelopeOf(f), headers: reversed };
  assert.equal(encodeEnvelope(env).toString("hex"), vectors.envelopes[2].hex);
});

test("the third envelope's unique key and fingerprint are the derived ones", () => {
  const f = vectors.envelopes[2].fields;
  const env = envelopeOf(f);
  assert.equal(uniqueKey(f.queue, f.kind, env.payload), vectors.derived.unique_key);
  assert.equal(fingerprint(env), vectors.derived.fingerprint);
  // Not the clock or the headers; the options, yes.
  assert.equal(fingerprint({ ...env, enqueuedAtMs: 1n, headers: {} }), vectors.derived.fingerprint);
  assert.notEqual(fingerprint({ ...env, maxRetry: 4n }), vectors.derived.fingerprint);
});

test("integers take their smallest form, and out-of-range values are refused", () => {
  const base = envelopeOf(vectors.envelopes[3].fields);
  const hex = (n: bigint) => encodeEnvelope({ ...base, deadlineMs: n }).toString("hex");
  assert.ok(hex(-1n).includes("ff"));
  assert.ok(hex(-33n).includes("d0df"));
  assert.ok(hex(-129n).includes("d1ff7f"));
  assert.ok(hex(-(2n ** 40n)).includes("d3ffffff0000000000"));
  assert.throws(() => encodeEnvelope({ ...base, maxRetry: -1n }), RangeError);
  assert.throws(() => encodeEnvelope({ ...base, maxRetry: 2n ** 32n }), RangeError);
});
