"""The envelope writer against the golden vectors of contract v1 (byte for byte), and the
derived unique key and fingerprint. No Redis needed."""

import json
import unittest
from pathlib import Path

from chronos_producer import PRODUCER_NAME, Envelope, Producer, Task, fingerprint, unique_key
from chronos_producer.envelope import VERSION

CONTRACT = Path(__file__).resolve().parents[2] / "chronos-protocol" / "contract" / "v1"


def load_vectors():
    with open(CONTRACT / "envelopes.json", encoding="utf-8") as f:
        return json.load(f)


def envelope_of(fields):
    return Envelope(
        id=fields["id"],
        kind=fields["kind"],
        queue=fields["queue"],
        payload=bytes.fromhex(fields["payload_hex"]),
        enqueued_at_ms=fields["enqueued_at_ms"],
        max_retry=fields["max_retry"],
        timeout_ms=fields["timeout_ms"],
        deadline_ms=fields["deadline_ms"],
        unique_key=fields["unique_key"],
        retention_ms=fields["retention_ms"],
        discard={"archive": False, "discard": True}[fields["dead_letter"]],
        headers=fields["headers"],
    )


class EnvelopeVectors(unittest.TestCase):
    def test_every_vector_is_byte_exact(self):
        vectors = load_vectors()
        self.assertEqual(vectors["contract"], 1)
        self.assertGreaterEqual(len(vectors["envelopes"]), 5)
        for v in vectors["envelopes"]:
            with self.subTest(v["name"]):
                self.assertEqual(envelope_of(v["fields"]).encode().hex(), v["hex"])

    def test_derived_unique_key_and_fingerprint_of_the_third_vector(self):
        vectors = load_vectors()
        fields = vectors["envelopes"][2]["fields"]
        payload = bytes.fromhex(fields["payload_hex"])
        self.assertEqual(
            unique_key(fields["queue"], fields["kind"], payload), vectors["derived"]["unique_key"]
        )
        self.assertEqual(fields["unique_key"], vectors["derived"]["unique_key"])
        self.assertEqual(fingerprint(envelope_of(fields)), vectors["derived"]["fingerprint"])

    def test_fingerprint_ignores_clock_and_headers_but_not_options(self):
        fields = load_vectors()["envelopes"][2]["fields"]
        base = envelope_of(fields)
        other = envelope_of(fields)
        other.enqueued_at_ms += 1
        other.headers = {}
        self.assertEqual(fingerprint(base), fingerprint(other))
        other.max_retry += 1
        self.assertNotEqual(fingerprint(base), fingerprint(other))
        other = envelope_of(fields)
        other.discard = False
        self.assertNotEqual(fingerprint(base), fingerprint(other))

    def test_smallest_forms_of_integers_strings_payloads_and_maps(self):
        def enc(**kw):
            args = dict(id="", kind="k", queue="q", payload=b"", enqueued_at_ms=0)
            args.update(kw)
            return Envelope(**args).encode()

        self.assertEqual(enc()[:2], bytes([VERSION, 0x9F]))
        # deadline_ms is the one signed field: negative values in their smallest signed form.
        for n, want in [
            (-1, "ff"),
            (-32, "e0"),
            (-33, "d0df"),
            (-128, "d080"),
            (-129, "d1ff7f"),
            (-32769, "d2ffff7fff"),
            (-(1 << 31) - 1, "d3ffffffff7fffffff"),
            (255, "ccff"),
            (256, "cd0100"),
            (65535, "cdffff"),
            (1 << 32, "cf0000000100000000"),
        ]:
            with self.subTest(n=n):
                self.assertIn(bytes.fromhex("00 19 c0" + want + "c0c0"), enc(deadline_ms=n))
        self.assertIn(b"\xd9\x20" + b"k" * 32, enc(kind="k" * 32))
        self.assertIn(b"\xda\x01\x00" + b"k" * 256, enc(kind="k" * 256))
        self.assertIn(b"\xc5\x01\x00", enc(payload=b"x" * 256))
        self.assertIn(b"\xc6\x00\x01\x00\x00", enc(payload=b"x" * 65536))
        many = {f"h{i:02}": "v" for i in range(16)}
        self.assertTrue(enc(headers=many).endswith(b"\xa3h15\xa1v"))
        self.assertIn(b"\xde\x00\x10\xa3h00", enc(headers=many))
        with self.assertRaises(OverflowError):
            enc(timeout_ms=-1)
        with self.assertRaises(OverflowError):
            enc(deadline_ms=1 << 64)

    def test_headers_are_sorted_bytewise(self):
        b = Envelope("", "k", "q", b"", 0, headers={"b": "2", "a": "1", "\u00e9": "3", "Z": "0"})
        want = b"\x00\xc0\xc0\x84" + b"\xa1Z\xa10\xa1a\xa11\xa1b\xa12\xa2\xc3\xa9\xa13"
        self.assertTrue(b.encode().endswith(want))


class ProducerEncoding(unittest.TestCase):
    """What the producer builds from its arguments, before any Redis call."""

    def setUp(self):
        self.p = Producer(None, namespace="chronos")  # type: ignore[arg-type]

    def test_a_plain_task_encodes_as_the_first_vector(self):
        v = load_vectors()["envelopes"][0]
        self.assertEqual(v["fields"]["headers"]["chronos-producer"], PRODUCER_NAME)
        t = Task("email:send", {"to": "ada@example.com", "n": 7})
        prepared = self.p._prepare(0, t, "default", v["fields"]["enqueued_at_ms"])
        self.assertTrue(prepared.plain)
        self.assertEqual(prepared.data.hex(), v["hex"])

    def test_the_third_vectors_options_give_its_unique_key_and_fingerprint(self):
        vectors = load_vectors()
        v = vectors["envelopes"][2]
        f = v["fields"]
        payload = json.loads(bytes.fromhex(f["payload_hex"]))
        t = Task(
            f["kind"],
            payload,
            queue=f["queue"],
            id=f["id"],
            unique_ttl=60000,
            retention=f["retention_ms"],
            max_retry=f["max_retry"],
            timeout=f["timeout_ms"],
            deadline=f["deadline_ms"],
            discard=True,
            headers={"traceparent": f["headers"]["traceparent"]},
        )
        p = self.p._prepare(0, t, "default", f["enqueued_at_ms"])
        self.assertFalse(p.plain)
        # json.dumps keeps non-ASCII text as is, where the vector's payload has \u00e9: the
        # bytes differ, so the key and fingerprint are checked over the vector's own bytes.
        p.env.payload = bytes.fromhex(f["payload_hex"])
        p.env.unique_key = unique_key(f["queue"], f["kind"], p.env.payload)
        self.assertEqual(p.env.encode().hex(), v["hex"])
        self.assertEqual(fingerprint(p.env), vectors["derived"]["fingerprint"])

    def test_payload_json_is_compact_and_keeps_unicode(self):
        t = Task("k", {"s": "caf\u00e9 \u2603", "l": [1, 2.5, None, True]})
        p = self.p._prepare(0, t, "q", 0)
        self.assertEqual(p.env.payload, '{"s":"caf\u00e9 \u2603","l":[1,2.5,null,true]}'.encode())
        want = {"chronos-codec": "json", "chronos-producer": PRODUCER_NAME}
        self.assertEqual(p.env.headers, want)

    def test_new_ids_are_32_lowercase_hex(self):
        p = self.p._prepare(0, Task("k", 1, process_in=5), "q", 0)
        self.assertRegex(p.env.id, r"\A[0-9a-f]{32}\Z")
        other = self.p._prepare(0, Task("k", 1, process_in=5), "q", 0)
        self.assertNotEqual(p.env.id, other.env.id)


if __name__ == "__main__":
    unittest.main()
