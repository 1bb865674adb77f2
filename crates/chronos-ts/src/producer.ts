/**
 * Enqueue tasks for chronos-rs workers, under producer contract v1
 * (`crates/chronos-protocol/contract/CONTRACT.md`).
 *
 * A {@link Producer} validates each task, encodes its envelope (`envelope.ts`) and runs the
 * contract's scripts (`v1/push.lua` for plain tasks, `v1/enqueue.lua` for the others) with
 * EVALSHA, one call per queue and chunk. Every call names a receipt, so a call whose reply
 * was lost is re-sent unchanged and never enqueues twice.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import type { Redis, Cluster } from "ioredis";
import { ReplyError } from "ioredis";
import {
  DEFAULT_MAX_RETRY,
  Envelope,
  EnvelopeRangeError,
  encodeEnvelope,
  fingerprint,
  uniqueKey,
} from "./envelope";

/** This library's version, named in the `chronos-producer` header of every task. */
export const VERSION = "0.1.0";
/** The `chronos-producer` header's value. */
export const PRODUCER_NAME = `chronos-ts/${VERSION}`;
const CODEC_HEADER = "chronos-codec";
const PRODUCER_HEADER = "chronos-producer";
/** The consumer group of every queue stream. */
const GROUP = "workers";
/** Plain tasks per push.lua call, as the Rust producer. */
const PUSH_CHUNK = 500;
/** Tasks per enqueue.lua call, as the Rust producer. */
const ENQUEUE_CHUNK = 125;
const MAX_NAME_LEN = 128;
const MAX_ID_LEN = 256;
const U32_MAX = 0xffffffff;
const I64_MAX = (1n << 63n) - 1n;
const I64_MIN = -(1n << 63n);
const PLAIN_ID = /^[0-9]+-[0-9]+$/;
/** A re-send goes out only while this much of the receipt's TTL is left after it. */
const RESEND_MARGIN_MS = 1000;

/** A duration in milliseconds, or a point in time (a Date or unix ms). */
type Ms = number | bigint;

/** The options of one task; every one is optional. */
export interface EnqueueOptions {
  /** The queue (default `"default"`). */
  queue?: string;
  /** Run after this many ms (Redis's clock). */
  processInMs?: Ms;
  /** Run at this time (a past one runs at once). */
  processAt?: Date | Ms;
  /** No other task of the same queue, kind and payload while the lock lives (ms). */
  uniqueTtlMs?: Ms;
  /** An explicit id: enqueueing it again with the same task answers `existing`. */
  id?: string;
  /** Keep the completed task this long (ms). */
  retentionMs?: Ms;
  /** Retries after the first attempt, 0 to 2^32-1 (default 25). */
  maxRetry?: number | bigint;
  /** Per-attempt time limit (ms). */
  timeoutMs?: Ms;
  /** Not run after this time. */
  deadline?: Date | Ms;
  /** Drop instead of archive when its retries run out. */
  discard?: boolean;
  /** Handed to the handler (`chronos-codec` and `chronos-producer` are always set). */
  headers?: Record<string, string>;
}

/** One task of {@link Producer.enqueueBatch}. */
export interface TaskSpec {
  /** The handler's kind, e.g. `email:send` (non-empty). */
  kind: string;
  /** Any JSON-serializable value; sent as `JSON.stringify(payload)` in UTF-8 (`undefined`
   * is sent as `null`). */
  payload?: unknown;
  /** The task's options (its `queue` wins over the batch's default). */
  options?: EnqueueOptions;
}

/** A task's state as Redis holds it (a string the workers write; the ones named here are the
 * contract's, a later release may add others). */
export type TaskState = "pending" | "scheduled" | "active" | "retry" | "archived" | "completed" | (string & {});

/** A task that is in Redis: the answer for each task enqueued (or found already there). */
export interface TaskInfo {
  /** The task id: `<ms>-<seq>` (its stream entry's) for a plain task, 32 lowercase hex
   * characters for a generated one, else the caller's explicit id. */
  id: string;
  /** The queue it is in. */
  queue: string;
  /** The handler's kind. */
  kind: string;
  /** `pending` or `scheduled` for a task this call wrote, else the stored state. */
  state: TaskState;
  /** `created` when this call wrote it (also after a re-send of the call whose first reply
   * was lost), `existing` when an explicit id's same task was already there (nothing
   * written). */
  outcome: "created" | "existing";
  /** When it is due (unix ms; Redis's clock for ready tasks). */
  runAtMs: number;
}

/** A task that was not enqueued. `code` says why; `queue`, `kind` and `taskId` name it. */
export class EnqueueError extends Error {
  constructor(
    message: string,
    public readonly code:
      | "invalid_queue"
      | "invalid_task_id"
      | "payload_too_large"
      | "invalid_option"
      | "duplicate"
      | "id_conflict"
      | "producer"
      | "connection_lost",
    public queue?: string,
    public kind?: string,
    public taskId?: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}
/** A task refused before anything was sent: nothing was written. The base of
 * {@link InvalidQueue}, {@link InvalidTaskId}, {@link PayloadTooLarge} and
 * {@link InvalidOption}. */
export class ValidationError extends EnqueueError {}
/** A queue name that is empty, longer than 128 bytes, or holds `{`, `}`, whitespace or
 * control characters. Nothing was written. */
export class InvalidQueue extends ValidationError {
  constructor(m: string, queue?: string) {
    super(m, "invalid_queue", queue);
  }
}
/** An explicit id that is empty, longer than 256 bytes, holds whitespace or control
 * characters, or has the shape `<digits>-<digits>`. Nothing was written. */
export class InvalidTaskId extends ValidationError {
  constructor(m: string) {
    super(m, "invalid_task_id");
  }
}
/** The encoded payload is over the producer's limit. Nothing was written. */
export class PayloadTooLarge extends ValidationError {
  constructor(m: string) {
    super(m, "payload_too_large");
  }
}
/** An option, kind or payload the contract cannot carry. Nothing was written. */
export class InvalidOption extends ValidationError {
  constructor(m: string) {
    super(m, "invalid_option");
  }
}
/** A unique task whose lock another task holds: nothing was written (row -1). */
export class DuplicateTask extends EnqueueError {
  constructor(m: string) {
    super(m, "duplicate");
  }
}
/** The explicit id holds a different task: nothing was written (row -2). */
export class TaskIdConflict extends EnqueueError {
  constructor(m: string) {
    super(m, "id_conflict");
  }
}
/** Redis answered what the contract does not allow; the message says what was written. */
export class ProducerError extends EnqueueError {
  constructor(m: string, code: "producer" | "connection_lost" = "producer") {
    super(m, code);
  }
}
/** Redis stayed unreachable after the re-sends: the tasks may or may not be in Redis. */
export class ConnectionLost extends ProducerError {
  constructor(m: string) {
    super(m, "connection_lost");
  }
}

/** How a {@link Producer} is set up. */
export interface ProducerOptions {
  /** The key prefix the workers use (default `chronos`). */
  namespace?: string;
  /** Where `push.lua` and `enqueue.lua` are (default: the contract's `v1` folder of the
   * repository this package sits in). */
  scriptsDir?: string;
  /** Largest encoded payload, in bytes (default 1 MiB). */
  maxPayload?: number;
  /** How long each call's receipt lives in Redis, ms (default 15000, as the Rust producer):
   * the window in which a re-sent call is answered from it instead of writing again. */
  receiptTtlMs?: number;
  /** Re-sends of a call whose reply was lost (default 3), unchanged (same receipt). */
  resends?: number;
  /** Wait before the first re-send, ms (default 50), doubling for each next one. */
  resendBackoffMs?: number;
}

interface Script {
  name: string;
  text: string;
  sha: string;
}

interface Prepared {
  index: number;
  queue: string;
  env: Envelope;
  data: Buffer;
  plain: boolean;
  explicit: boolean;
  atMs: bigint;
  delayMs: bigint | null;
  uniqueTtlMs: bigint;
}

function loadScript(dir: string, name: string): Script {
  const text = readFileSync(path.join(dir, name), "utf8");
  return { name, text, sha: createHash("sha1").update(text, "utf8").digest("hex") };
}

function badChars(s: string): boolean {
  // Unicode White_Space or control characters (category Cc): Rust's `char::is_whitespace`
  // and `char::is_control`, which the workers check.
  return /[\p{White_Space}\p{Cc}]/u.test(s);
}

/** Throws {@link InvalidQueue} unless `name` is a valid queue name. */
export function checkQueue(name: unknown): asserts name is string {
  if (typeof name !== "string") throw new InvalidQueue(`queue name must be a string`);
  let reason: string | null = null;
  if (name === "") reason = "must not be empty";
  else if (Buffer.byteLength(name, "utf8") > MAX_NAME_LEN) reason = `must be at most ${MAX_NAME_LEN} bytes`;
  else if (name.includes("{") || name.includes("}")) reason = "must not contain '{' or '}'";
  else if (badChars(name)) reason = "must not contain whitespace or control characters";
  if (reason) throw new InvalidQueue(`invalid queue name ${JSON.stringify(name)}: ${reason}`, name);
}

/** Throws {@link InvalidTaskId} unless `id` is a valid explicit id. */
export function checkTaskId(id: unknown): asserts id is string {
  if (typeof id !== "string") throw new InvalidTaskId("task id must be a string");
  let reason: string | null = null;
  if (id === "") reason = "must not be empty";
  else if (Buffer.byteLength(id, "utf8") > MAX_ID_LEN) reason = `must be at most ${MAX_ID_LEN} bytes`;
  else if (badChars(id)) reason = "must not contain whitespace or control characters";
  else if (PLAIN_ID.test(id)) reason = "must not have the shape `<digits>-<digits>` of a generated id";
  if (reason) throw new InvalidTaskId(`invalid task id ${JSON.stringify(id)}: ${reason}`);
}

function millis(name: string, v: Ms, minimum = 0n): bigint {
  let ms: bigint;
  if (typeof v === "bigint") ms = v;
  else if (typeof v === "number" && Number.isInteger(v)) ms = BigInt(v);
  else throw new InvalidOption(`${name} must be an integer number of ms`);
  if (ms < minimum) throw new InvalidOption(`${name} must be at least ${minimum} ms (got ${ms})`);
  if (ms > I64_MAX) throw new InvalidOption(`${name} is too large (${ms} ms)`);
  return ms;
}

function instant(name: string, v: Date | Ms): bigint {
  if (v instanceof Date) {
    const t = v.getTime();
    if (Number.isNaN(t)) throw new InvalidOption(`${name} is an invalid Date`);
    return BigInt(t);
  }
  const ms = typeof v === "bigint" ? v : Number.isInteger(v) ? BigInt(v) : null;
  if (ms === null) throw new InvalidOption(`${name} must be a Date or integer unix ms`);
  if (ms < I64_MIN || ms > I64_MAX) throw new InvalidOption(`${name} is out of range`);
  return ms;
}

function text(v: unknown): string {
  return Buffer.isBuffer(v) ? v.toString("utf8") : String(v);
}

function integer(v: unknown, what: string): number {
  const n = typeof v === "number" ? v : Number(text(v));
  if (!Number.isFinite(n)) throw new ProducerError(`bad reply from ${what}: ${String(v)} is not an integer`);
  return n;
}

function named<E extends EnqueueError>(e: E, p: { queue: string; kind?: string; taskId?: string }): E {
  e.queue ??= p.queue;
  e.kind ??= p.kind;
  e.taskId ??= p.taskId;
  return e;
}

/** Connection closes seen per ioredis client (one listener per client, whatever the number of
 * producers on it): a call during which the connection closed may have been re-sent by
 * ioredis itself after its reconnect (`autoResendUnfulfilledCommands`). */
const closes = new WeakMap<object, { n: number }>();

function closeCounter(client: Redis | Cluster): { n: number } {
  let c = closes.get(client);
  if (!c) {
    const counter = { n: 0 };
    c = counter;
    closes.set(client, counter);
    client.on("close", () => counter.n++);
  }
  return c;
}

/**
 * Enqueues tasks into a chronos-rs namespace through an ioredis client (or cluster), under
 * producer contract v1.
 *
 * Guarantees: every task is validated before anything is sent (a refused task writes
 * nothing); each script call carries a receipt, and a call whose reply is lost (the connection
 * dropped while it was in flight) is re-sent unchanged (same receipt token, same arguments),
 * by ioredis after its reconnect or by the producer, up to `resends` times, so it never
 * enqueues a task twice while the receipt lives (`receiptTtlMs`). The producer does not
 * re-send once that much time has passed since the first send: it answers
 * {@link ConnectionLost} instead. (ioredis's own re-send after a reconnect is not timed by the
 * producer: keep its reconnects within the receipt TTL, or raise `receiptTtlMs`.)
 */
export class Producer {
  /** The key prefix of every key written. */
  readonly namespace: string;
  private readonly push: Script;
  private readonly enqueueScript: Script;
  private readonly maxPayload: number;
  private readonly receiptTtlMs: number;
  private readonly resends: number;
  private readonly resendBackoffMs: number;
  private readonly known = new Set<string>();
  private readonly closed: { n: number };

  /**
   * A producer writing through `client` (which it does not close). Reads `push.lua` and
   * `enqueue.lua` from `options.scriptsDir` (default `<package root>/../chronos-protocol/
   * contract/v1`) at once; throws when they are missing or the namespace is not a valid name.
   */
  constructor(
    readonly client: Redis | Cluster,
    options: ProducerOptions = {},
  ) {
    this.namespace = options.namespace ?? "chronos";
    try {
      checkQueue(this.namespace);
    } catch (e) {
      throw new Error(String((e as Error).message).replace("queue name", "namespace"));
    }
    const dir = options.scriptsDir ?? path.resolve(__dirname, "..", "..", "..", "chronos-protocol", "contract", "v1");
    try {
      this.push = loadScript(dir, "push.lua");
      this.enqueueScript = loadScript(dir, "enqueue.lua");
    } catch (e) {
      throw new Error(`the contract scripts push.lua and enqueue.lua are not in ${dir} (pass scriptsDir): ${e}`);
    }
    this.maxPayload = options.maxPayload ?? 1 << 20;
    this.receiptTtlMs = options.receiptTtlMs ?? 15000;
    this.resends = options.resends ?? 3;
    this.resendBackoffMs = options.resendBackoffMs ?? 50;
    if (!Number.isInteger(this.receiptTtlMs) || this.receiptTtlMs < 1) throw new Error("receiptTtlMs must be a positive integer");
    this.closed = closeCounter(client);
  }

  private key(queue: string, name: string): string {
    return `${this.namespace}:{${queue}}:${name}`;
  }

  /**
   * Enqueues one task of `kind` with `payload` (JSON) into `options.queue` (default
   * `default`); resolves to its {@link TaskInfo} once Redis holds it. Rejects with an
   * {@link EnqueueError} subclass when the task is not enqueued ({@link ValidationError}s
   * before anything is sent).
   */
  async enqueue(kind: string, payload: unknown, options: EnqueueOptions = {}): Promise<TaskInfo> {
    const [r] = await this.enqueueBatch([{ kind, payload, options }], { queue: options.queue });
    if (r instanceof EnqueueError) throw r;
    return r;
  }

  /**
   * Enqueues `tasks` (each into its own queue, else `defaults.queue`, else `default`); per
   * task, in order, its {@link TaskInfo} or the {@link EnqueueError} that says why it was not
   * enqueued (returned, not thrown). Per queue, plain tasks go in push.lua calls (up to 500
   * each) and the others in enqueue.lua calls (up to 125 each, each atomic); all calls go out
   * together on the connection. A call whose reply is lost is re-sent unchanged: one call
   * never enqueues a task twice. Never rejects.
   */
  async enqueueBatch(tasks: TaskSpec[], defaults: { queue?: string } = {}): Promise<(TaskInfo | EnqueueError)[]> {
    const results: (TaskInfo | EnqueueError | undefined)[] = new Array(tasks.length);
    const now = BigInt(Date.now());
    const byQueue = new Map<string, Prepared[]>();
    tasks.forEach((t, i) => {
      try {
        const p = this.prepare(i, t, defaults.queue ?? "default", now);
        const list = byQueue.get(p.queue) ?? [];
        list.push(p);
        byQueue.set(p.queue, list);
      } catch (e) {
        results[i] = e instanceof EnqueueError ? e : new ProducerError(`task ${i}: ${(e as Error)?.message ?? e}`);
      }
    });
    await Promise.all(
      [...byQueue].map(async ([queue, items]) => {
        try {
          await this.register(queue);
        } catch (e) {
          for (const p of items) results[p.index] = this.forTask(e, p);
          return;
        }
        const calls: Promise<void>[] = [];
        const plain = items.filter((p) => p.plain);
        const full = items.filter((p) => !p.plain);
        for (let k = 0; k < plain.length; k += PUSH_CHUNK) {
          const chunk = plain.slice(k, k + PUSH_CHUNK);
          calls.push(this.runChunk(() => this.pushChunk(queue, chunk), chunk, results));
        }
        for (let k = 0; k < full.length; k += ENQUEUE_CHUNK) {
          const chunk = full.slice(k, k + ENQUEUE_CHUNK);
          calls.push(this.runChunk(() => this.enqueueChunk(queue, chunk), chunk, results));
        }
        await Promise.all(calls);
      }),
    );
    return results.map((r) => r ?? new ProducerError("task without a result"));
  }

  private prepare(index: number, t: TaskSpec, defaultQueue: string, now: bigint): Prepared {
    const o = t.options ?? {};
    const queue = o.queue ?? defaultQueue;
    const ctx = { queue, kind: t.kind, taskId: o.id };
    try {
      if (typeof t.kind !== "string" || t.kind === "") throw new InvalidOption("kind must be a non-empty string");
      checkQueue(queue);
      const explicit = o.id !== undefined;
      if (explicit) checkTaskId(o.id);
      let json: string | undefined;
      try {
        json = JSON.stringify(t.payload === undefined ? null : t.payload);
      } catch (e) {
        throw new InvalidOption(`payload is not JSON-serializable: ${(e as Error).message}`);
      }
      if (json === undefined) throw new InvalidOption("payload is not JSON-serializable");
      const payload = Buffer.from(json, "utf8");
      if (payload.length > this.maxPayload) {
        throw new PayloadTooLarge(`payload of ${payload.length} bytes is over the limit of ${this.maxPayload} bytes`);
      }
      if (o.processInMs !== undefined && o.processAt !== undefined) {
        throw new InvalidOption("give processInMs or processAt, not both");
      }
      const delay = o.processInMs === undefined ? null : millis("processInMs", o.processInMs);
      const at = o.processAt === undefined ? null : instant("processAt", o.processAt);
      const uttl = o.uniqueTtlMs === undefined ? null : millis("uniqueTtlMs", o.uniqueTtlMs, 1n);
      const retention = o.retentionMs === undefined ? null : millis("retentionMs", o.retentionMs);
      const timeout = o.timeoutMs === undefined ? null : millis("timeoutMs", o.timeoutMs);
      const deadline = o.deadline === undefined ? null : instant("deadline", o.deadline);
      const mr = o.maxRetry ?? DEFAULT_MAX_RETRY;
      const maxRetry = typeof mr === "bigint" ? mr : Number.isInteger(mr) ? BigInt(mr) : null;
      if (maxRetry === null || maxRetry < 0n || maxRetry > BigInt(U32_MAX)) {
        throw new InvalidOption(`maxRetry must be an integer from 0 to ${U32_MAX}`);
      }
      if (o.discard !== undefined && typeof o.discard !== "boolean") throw new InvalidOption("discard must be a boolean");
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(o.headers ?? {})) {
        if (typeof v !== "string") throw new InvalidOption(`headers must map strings to strings (${k})`);
        headers[k] = v;
      }
      headers[CODEC_HEADER] = "json";
      headers[PRODUCER_HEADER] = PRODUCER_NAME;
      const plain = !explicit && delay === null && at === null && uttl === null && retention === null;
      const env: Envelope = {
        id: plain ? "" : explicit ? (o.id as string) : randomBytes(16).toString("hex"),
        kind: t.kind,
        queue,
        payload,
        enqueuedAtMs: now,
        maxRetry,
        timeoutMs: timeout,
        deadlineMs: deadline,
        uniqueKey: uttl === null ? null : uniqueKey(queue, t.kind, payload),
        retentionMs: retention,
        discard: o.discard === true,
        headers,
      };
      let data: Buffer;
      try {
        data = encodeEnvelope(env);
      } catch (e) {
        if (e instanceof EnvelopeRangeError) throw new InvalidOption(e.message);
        throw e;
      }
      return {
        index,
        queue,
        env,
        data,
        plain,
        explicit,
        atMs: at === null ? 0n : at > 1n ? at : 1n,
        delayMs: delay,
        uniqueTtlMs: uttl ?? 0n,
      };
    } catch (e) {
      if (e instanceof EnqueueError) throw named(e, ctx);
      throw e;
    }
  }

  /** Creates the queue's stream and group and adds it to `<ns>:queues`, once per producer. */
  private async register(queue: string): Promise<void> {
    if (this.known.has(queue)) return;
    await this.resending(async () => {
      try {
        await this.client.xgroup("CREATE", this.key(queue, "stream"), GROUP, "0", "MKSTREAM");
      } catch (e) {
        if (!(e instanceof ReplyError) || !String((e as Error).message).includes("BUSYGROUP")) throw e;
      }
      await this.client.sadd(`${this.namespace}:queues`, queue);
    }, false);
    this.known.add(queue);
  }

  /** Runs `call`, and while it fails with anything but a Redis reply (the connection went,
   * so the reply may be lost), runs it again unchanged, up to `resends` times; with `timed`,
   * only while the call's receipt (set no earlier than the first send) surely still lives. */
  private async resending<T>(call: () => Promise<T>, timed: boolean): Promise<T> {
    const start = Date.now();
    for (let tries = 0; ; tries++) {
      try {
        return await call();
      } catch (e) {
        if (e instanceof ReplyError || e instanceof EnqueueError) throw e;
        const wait = this.resendBackoffMs * 2 ** tries;
        const late = timed && Date.now() + wait - start >= this.receiptTtlMs - RESEND_MARGIN_MS;
        if (tries >= this.resends || late) {
          throw new ConnectionLost(
            `Redis unreachable after ${tries + 1} tries in ${Date.now() - start} ms (${(e as Error)?.message ?? e}); the tasks of this call may or may not have been enqueued`,
          );
        }
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  /** EVALSHA; on NOSCRIPT (a restarted or flushed Redis) the same call by EVAL, which also
   * caches the script, on the node of the call's keys. */
  private async evalsha(script: Script, keys: string[], args: (string | Buffer)[]): Promise<unknown> {
    try {
      return await this.client.evalsha(script.sha, keys.length, ...keys, ...args);
    } catch (e) {
      if (!(e instanceof ReplyError) || !String((e as Error).message).startsWith("NOSCRIPT")) throw e;
      return await this.client.eval(script.text, keys.length, ...keys, ...args);
    }
  }

  /** One script call, re-sent unchanged (same receipt) while its reply is lost; the reply,
   * and whether it may have come from a re-send (the producer's, or ioredis's after a
   * reconnect). */
  private async call(script: Script, keys: string[], args: (string | Buffer)[]): Promise<[unknown, boolean]> {
    let sent = 0;
    const closes = this.closed.n;
    const reply = await this.resending(() => {
      sent++;
      return this.evalsha(script, keys, args);
    }, true);
    return [reply, sent > 1 || this.closed.n !== closes];
  }

  private forTask(e: unknown, p: Prepared): EnqueueError {
    const src = e instanceof EnqueueError ? e : new ProducerError(`the enqueue call failed: ${(e as Error)?.message ?? e}`);
    const copy = Object.create(Object.getPrototypeOf(src)) as EnqueueError;
    Object.assign(copy, src, { message: src.message, stack: src.stack });
    return named(copy, { queue: p.queue, kind: p.env.kind, taskId: p.env.id || undefined });
  }

  private async runChunk(
    run: () => Promise<(TaskInfo | EnqueueError)[]>,
    chunk: Prepared[],
    results: (TaskInfo | EnqueueError | undefined)[],
  ): Promise<void> {
    let rs: (TaskInfo | EnqueueError)[];
    try {
      rs = await run();
    } catch (e) {
      rs = chunk.map((p) => this.forTask(e, p));
    }
    chunk.forEach((p, j) => (results[p.index] = rs[j]));
  }

  private receipt(queue: string): string {
    return this.key(queue, "e:" + randomBytes(8).toString("hex"));
  }

  private async pushChunk(queue: string, chunk: Prepared[]): Promise<(TaskInfo | EnqueueError)[]> {
    const keys = [this.key(queue, "stream"), this.receipt(queue), this.key(queue, "events")];
    const policy = chunk.some((p) => p.env.maxRetry !== BigInt(DEFAULT_MAX_RETRY) || p.env.discard);
    const args: (string | Buffer)[] = [String(this.receiptTtlMs), policy ? "1" : ""];
    for (const p of chunk) {
      args.push(p.data);
      if (policy) {
        args.push(p.env.maxRetry === BigInt(DEFAULT_MAX_RETRY) ? "" : String(p.env.maxRetry));
        args.push(p.env.discard ? "1" : "");
      }
    }
    const [reply] = await this.call(this.push, keys, args);
    let ids: string[];
    if (typeof reply === "number") {
      if (reply === -3) throw new ProducerError(`the stream of queue ${JSON.stringify(queue)} has the wrong type; nothing written`);
      throw new ProducerError(`push.lua answered ${reply}`);
    } else if (Array.isArray(reply)) {
      ids = reply.map(text);
    } else {
      const first = text(reply);
      if (!PLAIN_ID.test(first)) throw new ProducerError(`push.lua answered a bad first id ${first}`);
      const [ms, seq] = first.split("-");
      ids = chunk.map((_, k) => `${ms}-${BigInt(seq) + BigInt(k)}`);
    }
    if (ids.length !== chunk.length) throw new ProducerError(`push.lua answered ${ids.length} ids for ${chunk.length} tasks`);
    return chunk.map((p, k) => ({
      id: ids[k],
      queue,
      kind: p.env.kind,
      state: "pending",
      outcome: "created" as const,
      runAtMs: Number(ids[k].split("-")[0]),
    }));
  }

  private async enqueueChunk(queue: string, chunk: Prepared[]): Promise<(TaskInfo | EnqueueError)[]> {
    const keys = [
      this.key(queue, "stream"),
      this.key(queue, "scheduled"),
      this.receipt(queue),
      this.key(queue, "deduplicated"),
      ...chunk.map((p) => this.key(queue, "t:" + p.env.id)),
      ...chunk.filter((p) => p.uniqueTtlMs > 0n).map((p) => this.key(queue, "u:" + p.env.uniqueKey)),
      this.key(queue, "events"),
    ];
    const args: (string | Buffer)[] = [String(this.receiptTtlMs)];
    for (const p of chunk) {
      args.push(
        p.env.id,
        p.data,
        String(p.atMs),
        String(p.delayMs ?? 0n),
        String(p.uniqueTtlMs),
        String(p.env.maxRetry),
        p.env.discard ? "1" : "0",
        p.explicit ? fingerprint(p.env) : "",
        "", // priority level
        "", // tenant
        "0", // last in, first out
        "", // deduplication mode
      );
    }
    const [reply, resent] = await this.call(this.enqueueScript, keys, args);
    if (!Array.isArray(reply) || reply.length !== 1 + chunk.length) {
      throw new ProducerError(`enqueue.lua answered ${JSON.stringify(reply)} for ${chunk.length} tasks`);
    }
    const now = integer(reply[0], "enqueue.lua");
    return chunk.map((p, k) => this.row(queue, p, reply[k + 1], now, resent));
  }

  private row(queue: string, p: Prepared, row: unknown, now: number, resent: boolean): TaskInfo | EnqueueError {
    const ctx = { queue, kind: p.env.kind, taskId: p.env.id };
    const info = (state: string, outcome: "created" | "existing", runAtMs: number): TaskInfo => ({
      id: p.env.id,
      queue,
      kind: p.env.kind,
      state,
      outcome,
      runAtMs,
    });
    if (Array.isArray(row)) {
      if (integer(row[0], "enqueue.lua") === 2 && row.length >= 3) {
        // Already there: the same explicit task again, or what the first run of this call
        // wrote (a re-send answers from the receipt, which cannot tell the two apart). A
        // generated id is new, so only this call's first run can have written it; an
        // explicit one is taken as this call's when the call may have been re-sent.
        const outcome = !p.explicit || resent ? "created" : "existing";
        return info(text(row[2]), outcome, integer(row[1], "enqueue.lua"));
      }
      return named(new ProducerError(`enqueue.lua answered an unknown row ${JSON.stringify(row)}`), ctx);
    }
    const code = integer(row, "enqueue.lua");
    switch (code) {
      case 1:
        return info("pending", "created", now);
      case 3:
        return info("scheduled", "created", p.atMs > 0n ? Number(p.atMs) : now + Number(p.delayMs ?? 0n));
      case -1:
        return named(new DuplicateTask(`a task of kind ${JSON.stringify(p.env.kind)} with the same payload holds the unique lock of queue ${JSON.stringify(queue)}; nothing written`), ctx);
      case -2:
        return named(new TaskIdConflict(`task id ${JSON.stringify(p.env.id)} in queue ${JSON.stringify(queue)} holds a different task; nothing written`), ctx);
      case -3:
        return named(new ProducerError(`the stream or scheduled set of queue ${JSON.stringify(queue)} has the wrong type; nothing written`), ctx);
      default:
        return named(new ProducerError(`enqueue.lua answered an unknown code ${code}`), ctx);
    }
  }
}
