import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import * as net from "node:net";
import Redis, { RedisOptions } from "ioredis";
import { DuplicateTask, EnqueueError, InvalidQueue, InvalidTaskId, PayloadTooLarge, Producer, TaskIdConflict, TaskInfo } from "../src/index";

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
});

test("a batch of plain tasks gets consecutive ids, in order", async () => {
  const p = new Producer(redis(), { namespace: ns() });
  const rs = (await p.enqueueBatch([1, 2, 3].map((i) => ({ kind: "k", payload: { i } })))).map(info);
  const [ms, seq] = rs[0].id.split("-");
  assert.deepEqual(rs.map((r) => r.id), [0, 1, 2].map((k) => `${ms}-${Number(seq) + k}`));
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
  assert.deepEqual(await c.keys(`${n}:*`), []);
});

/** A proxy to Redis that, once armed, forwards the next EVALSHA to Redis but closes the
 * client's connection instead of passing the reply on: the call ran, its reply is lost. */
async function replyDropper(target: URL): Promise<{ url: string; arm: () => void; dropped: () => number; close: () => void }> {
  let armed = false;
  let drops = 0;
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    let dropping = false;
    client.on("data", (d) => {
      if (armed && /evalsha/i.test(d.toString("latin1"))) {
        armed = false;
        dropping = true;
      }
      upstream.write(d);
    });
    upstream.on("data", (d) => {
      if (dropping) {
        drops++;
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
    arm: () => (armed = true),
    dropped: () => drops,
    close: () => {
      srv.close();
      for (const s of sockets) s.destroy();
    },
  };
}

async function lostReplyOnce(options: RedisOptions, explicit: boolean): Promise<void> {
  const direct = redis();
  const n = ns();
  // Load the scripts first, so the EVALSHA whose reply is dropped is the one that writes.
  await new Producer(direct, { namespace: n }).enqueue("warm", 0, { id: "warm-up" });
  const proxy = await replyDropper(new URL(url));
  try {
    const p = new Producer(redis({ ...options, retryStrategy: () => 20 }, proxy.url), { namespace: n });
    await p.enqueue("warm", 0, { queue: "default", id: "warm-up" }); // registered, connected
    proxy.arm();
    const t = await p.enqueue("lost:reply", { n: 1 }, explicit ? { id: "lost-1" } : {});
    assert.equal(proxy.dropped(), 1, "one reply was dropped");
    const ids = (await direct.xrange(`${n}:{default}:stream`, "-", "+")).map(([id]) => id);
    assert.equal(ids.length, 2, "the warm-up task and exactly one more: no duplicate");
    if (explicit) assert.equal(t.id, "lost-1");
    else assert.equal(t.id, ids[1], "the id answered is the one in Redis");
  } finally {
    proxy.close();
  }
}

test("a lost reply re-sent by the producer does not duplicate (plain task)", async () => {
  await lostReplyOnce({ autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 }, false);
});

test("a lost reply re-sent by the producer does not duplicate (explicit id)", async () => {
  await lostReplyOnce({ autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 }, true);
});

test("a lost reply re-sent by ioredis on reconnect does not duplicate either", async () => {
  await lostReplyOnce({}, false);
});
