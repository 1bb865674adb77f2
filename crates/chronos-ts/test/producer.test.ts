import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ChildProcess, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as net from "node:net";
import * as path from "node:path";
import Redis, { RedisOptions } from "ioredis";
import {
  ConnectionLost,
  DuplicateTask,
  EnqueueError,
  InvalidOption,
  InvalidQueue,
  InvalidTaskId,
  PayloadTooLarge,
  PRODUCER_NAME,
  Producer,
  TaskIdConflict,
  TaskInfo,
  ValidationError,
  encodeEnvelope,
} from "../src/index";

const V1 = path.resolve(__dirname, "..", "..", "..", "chronos-protocol", "contract", "v1");
const sha = (name: string) => createHash("sha1").update(readFileSync(path.join(V1, name), "utf8")).digest("hex");
const PUSH_SHA = sha("push.lua");
const ENQUEUE_SHA = sha("enqueue.lua");

let url = process.env.CHRONOS_REDIS_URL ?? "";
let server: ChildProcess | undefined;
const clients: Redis[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

before(async () => {
  if (url) return;
  // No Redis given: a throwaway one of our own.
  const port = await freePort();
  server = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], { stdio: "ignore" });
  url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((r) => {
      const s = net.connect(port, "127.0.0.1", () => (s.end(), r(true)));
      s.on("error", () => r(false));
    });
    if (up) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error("redis-server did not start");
});

after(async () => {
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
  server?.kill();
});

function redis(options: RedisOptions = {}, at = url): Redis {
  const c = new Redis(at, options);
  // Connection errors are what the proxy tests cause; the producer reports them itself.
  c.on("error", () => {});
  clients.push(c);
  return c;
}

function ns(): string {
  return `ts-${randomBytes(6).toString("hex")}`;
}

function info(r: TaskInfo | EnqueueError): TaskInfo {
  if (r instanceof EnqueueError) throw r;
  return r;
}

/** Counts the script calls `c` sends: the sha of each, in order. */
function spy(c: Redis): string[] {
  const calls: string[] = [];
  const evalsha = c.evalsha.bind(c) as (...a: unknown[]) => Promise<unknown>;
  (c as unknown as { evalsha: unknown }).evalsha = (sha: string, ...rest: unknown[]) => {
    calls.push(sha);
    return evalsha(sha, ...rest);
  };
  return calls;
}

/** The enqueue time a stored v1 envelope holds (the uint64 after `"Archive"`/`"Discard"`). */
function enqueuedAt(env: Buffer): bigint {
  for (const dl of ["Archive", "Discard"]) {
    const at = env.indexOf(Buffer.concat([Buffer.from([0xa7]), Buffer.from(dl)]));
    if (at >= 0 && env[at + 8] === 0xcf) return env.readBigUInt64BE(at + 9);
  }
  throw new Error("no enqueue time");
}

test("a plain task is one stream entry holding its envelope, and nothing else", async () => {
  const c = redis();
  const n = ns();
  const p = new Producer(c, { namespace: n });
  const t = await p.enqueue("email:send", { to: "ada@example.com" });
  assert.match(t.id, /^\d+-\d+$/);
  assert.deepEqual([t.state, t.outcome, t.queue], ["pending", "created", "default"]);
  const entries = await c.xrangeBuffer(`${n}:{default}:stream`, "-", "+");
  assert.equal(entries.length, 1);
  const [id, fields] = entries[0];
  assert.equal(id.toString(), t.id);
  assert.equal(fields[0].toString(), "e");
  const env = fields[1];
  assert.equal(env.subarray(0, 3).toString("hex"), "019fa0", "version, 15 values, empty id");
  assert.ok(env.includes(Buffer.from('{"to":"ada@example.com"}')));
  assert.ok(env.includes(Buffer.from("chronos-ts/")));
  assert.equal(await c.exists(`${n}:{default}:t:${t.id}`), 0, "no record");
  assert.equal(await c.sismember(`${n}:queues`, "default"), 1, "the queue is registered");
  assert.deepEqual(await c.xinfo("GROUPS", `${n}:{default}:stream`).then((g) => (g as unknown[][]).map((x) => x[1])), ["workers"]);
  // Byte for byte the envelope of the contract, with the producer's clock.
  const want = encodeEnvelope({
    id: "",
    kind: "email:send",
    queue: "default",
    payload: Buffer.from('{"to":"ada@example.com"}'),
    enqueuedAtMs: enqueuedAt(env),
    maxRetry: 25n,
    timeoutMs: null,
    deadlineMs: null,
    uniqueKey: null,
    retentionMs: null,
    discard: false,
    headers: { "chronos-codec": "json", "chronos-producer": PRODUCER_NAME },
  });
  assert.equal(env.toString("hex"), want.toString("hex"));
});

test("options travel in the envelope exactly, bigint ms included", async () => {
  const c = redis();
  const n = ns();
  const p = new Producer(c, { namespace: n });
  const deadline = 2n ** 53n + 1n; // not exact as a JS number
  const t = await p.enqueue("k", { a: "caf\u00e9" }, {
    queue: "q1",
    maxRetry: 3,
    discard: true,
    timeoutMs: 30_000n,
    deadline,
    retentionMs: 3_600_000,
    headers: { "x-b": "2", "x-a": "1" },
  });
  assert.match(t.id, /^[0-9a-f]{32}$/, "retention asks for a record");
  const [[, fields]] = await c.xrangeBuffer(`${n}:{q1}:stream`, "-", "+");
  const env = fields[fields.findIndex((f, i) => i % 2 === 0 && f.toString() === "e") + 1];
  const want = encodeEnvelope({
    id: t.id,
    kind: "k",
    queue: "q1",
    payload: Buffer.from(JSON.stringify({ a: "caf\u00e9" }), "utf8"),
    enqueuedAtMs: enqueuedAt(env),
    maxRetry: 3n,
    timeoutMs: 30_000n,
    deadlineMs: deadline,
    uniqueKey: null,
    retentionMs: 3_600_000n,
    discard: true,
    headers: { "x-a": "1", "x-b": "2", "chronos-codec": "json", "chronos-producer": PRODUCER_NAME },
  });
  assert.equal(env.toString("hex"), want.toString("hex"));
  assert.ok(env.includes(Buffer.from("cf0020000000000001", "hex")), "deadline 2^53+1 as uint64");
});

test("a batch of plain tasks gets consecutive ids, in order", async () => {
  const p = new Producer(redis(), { namespace: ns() });
  const rs = (await p.enqueueBatch([1, 2, 3].map((i) => ({ kind: "k", payload: { i } })))).map(info);
  const [ms, seq] = rs[0].id.split("-");
  assert.deepEqual(rs.map((r) => r.id), [0, 1, 2].map((k) => `${ms}-${Number(seq) + k}`));
});

test("a mixed batch makes one push.lua and one enqueue.lua call, answered in order", async () => {
  const c = redis();
  const calls = spy(c);
  const p = new Producer(c, { namespace: ns() });
  const rs = (
    await p.enqueueBatch([
      { kind: "k", payload: 1 },
      { kind: "k", payload: 2, options: { id: "mixed-2" } },
      { kind: "k", payload: 3 },
      { kind: "k", payload: 4, options: { processInMs: 60_000 } },
    ])
  ).map(info);
  assert.deepEqual(calls.slice().sort(), [PUSH_SHA, ENQUEUE_SHA].sort());
  assert.match(rs[0].id, /^\d+-\d+$/);
  assert.equal(rs[1].id, "mixed-2");
  assert.match(rs[2].id, /^\d+-\d+$/);
  assert.deepEqual([rs[3].state, rs[3].id.length], ["scheduled", 32]);
});

test("big batches are cut in calls of 500 plain and 125 other tasks, per queue", async () => {
  const c = redis();
  const n = ns();
  const calls = spy(c);
  const p = new Producer(c, { namespace: n });
  const tasks = [
    ...Array.from({ length: 501 }, (_, i) => ({ kind: "k", payload: i })),
    ...Array.from({ length: 126 }, (_, i) => ({ kind: "k", payload: i, options: { processInMs: 60_000 } })),
    { kind: "k", payload: 0, options: { queue: "other" } },
  ];
  const rs = (await p.enqueueBatch(tasks)).map(info);
  assert.equal(calls.filter((s) => s === PUSH_SHA).length, 3, "2 for default, 1 for other");
  assert.equal(calls.filter((s) => s === ENQUEUE_SHA).length, 2);
  assert.equal(new Set(rs.map((r) => r.id)).size, tasks.length);
  assert.equal(await c.xlen(`${n}:{default}:stream`), 501);
  assert.equal(await c.zcard(`${n}:{default}:scheduled`), 126);
  assert.equal(rs[627].queue, "other");
  assert.deepEqual((await c.smembers(`${n}:queues`)).sort(), ["default", "other"]);
});

test("a delayed task waits in the scheduled set with a record", async () => {
  const c = redis();
  const n = ns();
  const p = new Producer(c, { namespace: n });
  const before = Date.now();
  const t = await p.enqueue("k", { n: 1 }, { processInMs: 60_000 });
  assert.equal(t.state, "scheduled");
  assert.match(t.id, /^[0-9a-f]{32}$/);
  const score = Number(await c.zscore(`${n}:{default}:scheduled`, t.id));
  assert.ok(score >= before + 60_000 - 1000, `${score}`);
  assert.equal(await c.hget(`${n}:{default}:t:${t.id}`, "s"), "scheduled");
});

test("an explicit id is idempotent and refuses another task", async () => {
  const c = redis();
  const n = ns();
  const p = new Producer(c, { namespace: n });
  const first = await p.enqueue("order:ship", { order: 17 }, { id: "order-17" });
  assert.deepEqual([first.id, first.outcome], ["order-17", "created"]);
  const again = await p.enqueue("order:ship", { order: 17 }, { id: "order-17" });
  assert.deepEqual([again.id, again.outcome, again.state], ["order-17", "existing", "pending"]);
  assert.equal(await c.xlen(`${n}:{default}:stream`), 1);
  await assert.rejects(p.enqueue("order:ship", { order: 18 }, { id: "order-17" }), TaskIdConflict);
});

test("a unique task refuses a duplicate while its lock lives", async () => {
  const c = redis();
  const n = ns();
  const p = new Producer(c, { namespace: n });
  const t = await p.enqueue("report", { day: 1 }, { uniqueTtlMs: 60_000 });
  await assert.rejects(p.enqueue("report", { day: 1 }, { uniqueTtlMs: 60_000 }), DuplicateTask);
  const other = await p.enqueue("report", { day: 2 }, { uniqueTtlMs: 60_000 });
  assert.notEqual(other.id, t.id);
  assert.equal(await c.xlen(`${n}:{default}:stream`), 2);
});

test("invalid tasks are refused before anything is written", async () => {
  const c = redis();
  const n = ns();
  const p = new Producer(c, { namespace: n, maxPayload: 100 });
  const rs = await p.enqueueBatch([
    { kind: "k", payload: 1, options: { queue: "bad queue" } },
    { kind: "k", payload: 1, options: { id: "1764633600000-1" } },
    { kind: "k", payload: "x".repeat(200) },
    { kind: "k", payload: 1, options: { maxRetry: -1 } },
  ]);
  assert.ok(rs[0] instanceof InvalidQueue);
  assert.ok(rs[1] instanceof InvalidTaskId);
  assert.ok(rs[2] instanceof PayloadTooLarge);
  assert.equal((rs[3] as EnqueueError).code, "invalid_option");
  for (const r of rs) assert.ok(r instanceof ValidationError, String(r));
  assert.deepEqual(await c.keys(`${n}:*`), []);
});

test("every validation rule refuses with a clear error, and nothing is written", async () => {
  const c = redis();
  const n = ns();
  const calls = spy(c);
  const p = new Producer(c, { namespace: n });
  const refused: [unknown, Function][] = [
    [p.enqueue("k", 1, { queue: "" }), InvalidQueue],
    [p.enqueue("k", 1, { queue: "a{b}" }), InvalidQueue],
    [p.enqueue("k", 1, { queue: "q".repeat(129) }), InvalidQueue],
    [p.enqueue("k", 1, { queue: "tab\there" }), InvalidQueue],
    [p.enqueue("k", 1, { id: "" }), InvalidTaskId],
    [p.enqueue("k", 1, { id: "x".repeat(257) }), InvalidTaskId],
    [p.enqueue("k", 1, { id: "a b" }), InvalidTaskId],
    [p.enqueue("k", 1, { id: "a\u0007b" }), InvalidTaskId],
    [p.enqueue("k", 1, { id: "a\u00a0b" }), InvalidTaskId],
    [p.enqueue("k", 1, { id: "12-34" }), InvalidTaskId],
    [p.enqueue("k", { big: 1n }), InvalidOption],
    [p.enqueue("k", 1, { processInMs: 1.5 }), InvalidOption],
    [p.enqueue("k", 1, { processInMs: 1, processAt: 2 }), InvalidOption],
    [p.enqueue("k", 1, { uniqueTtlMs: 0 }), InvalidOption],
    [p.enqueue("k", 1, { maxRetry: 2 ** 32 }), InvalidOption],
    [p.enqueue("", 1), InvalidOption],
    [new Producer(c, { namespace: n, maxPayload: 4 }).enqueue("k", "12345"), PayloadTooLarge],
  ];
  for (const [promise, cls] of refused) {
    await assert.rejects(promise as Promise<unknown>, (e: EnqueueError) => {
      assert.ok(e instanceof cls, `${e} is a ${cls.name}`);
      assert.ok(e.message.length > 10 && e.code, e.message);
      return true;
    });
  }
  // Allowed: 256 bytes, and a shape that only looks like an entry id.
  await p.enqueue("k", 1, { id: "x".repeat(256) });
  await p.enqueue("k", 1, { id: "12-34a" });
  assert.equal(calls.length, 2, "only the two valid tasks were sent");
});

test("a script Redis does not have yet (NOSCRIPT) runs by EVAL, once, from scriptsDir", async () => {
  // Scripts of a text no Redis has seen (a comment added), so no shared script cache is
  // flushed: the first EVALSHA of each answers NOSCRIPT.
  const dir = mkdtempSync(path.join(tmpdir(), "chronos-ts-"));
  const mark = `\n-- chronos-ts test ${randomBytes(8).toString("hex")}\n`;
  for (const name of ["push.lua", "enqueue.lua"]) {
    writeFileSync(path.join(dir, name), readFileSync(path.join(V1, name), "utf8") + mark);
  }
  const c = redis();
  const n = ns();
  const calls = spy(c);
  const p = new Producer(c, { namespace: n, scriptsDir: dir });
  await p.enqueue("k", 1);
  await p.enqueue("k", 2, { id: "noscript-2" });
  await p.enqueue("k", 3);
  assert.equal(await c.xlen(`${n}:{default}:stream`), 3);
  assert.equal(calls.length, 3);
  assert.ok(!calls.includes(PUSH_SHA) && !calls.includes(ENQUEUE_SHA), "the scripts of scriptsDir ran");
  rmSync(dir, { recursive: true, force: true });
});

/** A proxy to Redis that, once armed, forwards the next EVALSHA (or EVAL) to Redis but
 * destroys the client's connection instead of passing the reply on: the call ran, its reply
 * is lost. With `stayDown`, it then accepts no connection any more. */
async function replyDropper(
  target: URL,
  stayDown = false,
): Promise<{ url: string; arm: () => void; dropped: () => number; scripts: () => number; log: string[]; close: () => void }> {
  let armed = false;
  let drops = 0;
  let scripts = 0;
  const log: string[] = [];
  let conns = 0;
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    const conn = ++conns;
    sockets.add(client).add(upstream);
    let dropping = false;
    client.on("data", (d) => {
      log.push(`${conn}> ${d.toString("latin1").slice(0, 30).replace(/\r\n/g, " ")}`);
      if (/\r\nEVAL(SHA)?\r\n/i.test(d.toString("latin1"))) {
        scripts++;
        if (armed) {
          armed = false;
          dropping = true;
        }
      }
      upstream.write(d);
    });
    upstream.on("data", (d) => {
      if (dropping) {
        log.push(`${conn}: reply dropped`);
        drops++;
        if (stayDown) srv.close();
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(d);
    });
    const end = () => (client.destroy(), upstream.destroy());
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const port = (srv.address() as net.AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    arm: () => {
      armed = true;
      scripts = 0;
      log.length = 0;
    },
    dropped: () => drops,
    scripts: () => scripts,
    log,
    close: () => {
      srv.close();
      for (const s of sockets) s.destroy();
    },
  };
}

async function loadScripts(c: Redis): Promise<void> {
  for (const name of ["push.lua", "enqueue.lua"]) await c.script("LOAD", readFileSync(path.join(V1, name), "utf8"));
}

/** No re-send by ioredis: a reply lost rejects the call, and the producer re-sends it. */
const PRODUCER_RESENDS: RedisOptions = { autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 };
/** ioredis's defaults: after its reconnect, ioredis re-sends the call itself. */
const IOREDIS_RESENDS: RedisOptions = {};

async function lostReplyOnce(options: RedisOptions, task: "plain" | "explicit" | "generated"): Promise<void> {
  const direct = redis();
  const n = ns();
  // Load the scripts first, so the EVALSHA whose reply is dropped is the one that writes.
  await loadScripts(direct);
  await new Producer(direct, { namespace: n }).enqueue("warm", 0, { id: "warm-up" });
  const proxy = await replyDropper(new URL(url));
  try {
    const p = new Producer(redis({ ...options, retryStrategy: () => 20 }, proxy.url), { namespace: n });
    await p.enqueue("warm", 0, { queue: "default", id: "warm-up" }); // registered, connected
    proxy.arm();
    const opts = { plain: {}, explicit: { id: "lost-1" }, generated: { processInMs: 60_000 } }[task];
    const t = await p.enqueue("lost:reply", { n: 1 }, opts);
    assert.equal(proxy.dropped(), 1, "one reply was dropped");
    assert.equal(proxy.scripts(), 2, `the call went out twice: ${proxy.log.join(" | ")}`);
    assert.equal(t.outcome, "created", "a re-send of this call's own write is its creation");
    const ids = (await direct.xrange(`${n}:{default}:stream`, "-", "+")).map(([id]) => id);
    const records = await direct.keys(`${n}:{default}:t:*`);
    if (task === "generated") {
      assert.equal(ids.length, 1, "the warm-up task only");
      assert.deepEqual(await direct.zrange(`${n}:{default}:scheduled`, 0, -1), [t.id], "exactly one, the id answered");
      assert.equal(records.length, 2, "warm-up's and this one's");
      assert.equal(t.state, "scheduled");
      return;
    }
    assert.equal(ids.length, 2, "the warm-up task and exactly one more: no duplicate");
    if (task === "explicit") {
      assert.equal(t.id, "lost-1");
      assert.equal(records.length, 2);
    } else {
      assert.equal(t.id, ids[1], "the id answered is the one in Redis");
      assert.equal(records.length, 1, "the warm-up's only");
    }
  } finally {
    proxy.close();
  }
}

test("a lost reply re-sent by the producer does not duplicate (plain task)", async () => {
  await lostReplyOnce(PRODUCER_RESENDS, "plain");
});

test("a lost reply re-sent by the producer does not duplicate (explicit id)", async () => {
  await lostReplyOnce(PRODUCER_RESENDS, "explicit");
});

test("a lost reply re-sent by the producer does not duplicate (generated id, delayed)", async () => {
  await lostReplyOnce(PRODUCER_RESENDS, "generated");
});

test("a lost reply re-sent by ioredis on reconnect does not duplicate (plain task)", async () => {
  await lostReplyOnce(IOREDIS_RESENDS, "plain");
});

test("a lost reply re-sent by ioredis on reconnect does not duplicate (explicit id)", async () => {
  await lostReplyOnce(IOREDIS_RESENDS, "explicit");
});

test("a lost reply re-sent by ioredis on reconnect does not duplicate (generated id, delayed)", async () => {
  await lostReplyOnce(IOREDIS_RESENDS, "generated");
});

test("a lost reply with Redis then unreachable answers ConnectionLost, and wrote once", async () => {
  const direct = redis();
  const n = ns();
  await new Producer(direct, { namespace: n }).enqueue("warm", 0, { id: "warm-up" });
  await loadScripts(direct);
  const proxy = await replyDropper(new URL(url), true);
  try {
    const c = redis({ ...PRODUCER_RESENDS, retryStrategy: () => 20 }, proxy.url);
    const p = new Producer(c, { namespace: n, resendBackoffMs: 10 });
    await p.enqueue("warm", 0, { id: "warm-up" });
    proxy.arm();
    const [r] = await p.enqueueBatch([{ kind: "lost:reply", payload: 1 }]);
    assert.ok(r instanceof ConnectionLost, String(r));
    assert.equal(r.code, "connection_lost");
    assert.match(r.message, /may or may not have been enqueued/);
    assert.equal(await direct.xlen(`${n}:{default}:stream`), 2, "written by the first send, once");
    c.disconnect();
  } finally {
    proxy.close();
  }
});
