/**
 * Runs the contract's enqueue vectors (`v1/enqueue.json`) and prints one JSON report on
 * stdout, for `tests/tests/producer_contract.rs`:
 *
 *   node dist/src/conformance.js --redis URL --namespace NS --vectors PATH/enqueue.json
 */
import { readFileSync } from "node:fs";
import Redis from "ioredis";
import { DuplicateTask, EnqueueError, EnqueueOptions, PRODUCER_NAME, Producer, TaskIdConflict, ValidationError } from "./producer";

function arg(name: string): string {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0 || i + 1 >= process.argv.length) throw new Error(`--${name} is required`);
  return process.argv[i + 1];
}

function options(o: Record<string, unknown> = {}): EnqueueOptions {
  const out: EnqueueOptions = {};
  if (o.process_in_ms !== undefined) out.processInMs = o.process_in_ms as number;
  if (o.process_at_ms !== undefined) out.processAt = o.process_at_ms as number;
  if (o.max_retry !== undefined) out.maxRetry = o.max_retry as number;
  if (o.discard !== undefined) out.discard = o.discard as boolean;
  if (o.timeout_ms !== undefined) out.timeoutMs = o.timeout_ms as number;
  if (o.deadline_ms !== undefined) out.deadline = o.deadline_ms as number;
  if (o.retention_ms !== undefined) out.retentionMs = o.retention_ms as number;
  if (o.unique_ttl_ms !== undefined) out.uniqueTtlMs = o.unique_ttl_ms as number;
  if (o.id !== undefined) out.id = o.id as string;
  if (o.headers !== undefined) out.headers = o.headers as Record<string, string>;
  return out;
}

/** A refused task's line of the report: `duplicate`, `id_conflict`, `invalid` or `other`. */
function errorOf(e: EnqueueError): { error: string; message: string } {
  let error = "other";
  if (e instanceof DuplicateTask) error = "duplicate";
  else if (e instanceof TaskIdConflict) error = "id_conflict";
  else if (e instanceof ValidationError) error = "invalid";
  return { error, message: e.message };
}

async function main(): Promise<void> {
  const vectors = JSON.parse(readFileSync(arg("vectors"), "utf8"));
  const client = new Redis(arg("redis"));
  // Connection errors also reach each call (and the report); on stderr, not stdout.
  client.on("error", (e) => process.stderr.write(`conformance: redis: ${e.message}\n`));
  try {
    process.stdout.write(JSON.stringify(await run(client, vectors)) + "\n");
  } finally {
    await client.quit().catch(() => client.disconnect());
  }
}

async function run(client: Redis, vectors: any): Promise<{ producer: string; cases: unknown[] }> {
  const p = new Producer(client, { namespace: arg("namespace") });
  const cases = [];
  for (const c of vectors.cases) {
    const tasks = c.tasks.map((t: { payload: unknown; options?: Record<string, unknown> }) => ({
      kind: vectors.kind,
      payload: t.payload,
      options: options(t.options),
    }));
    const rs = await p.enqueueBatch(tasks, { queue: vectors.queue });
    cases.push({
      name: c.name,
      results: rs.map((r) =>
        r instanceof EnqueueError ? errorOf(r) : { id: r.id, state: r.state, outcome: r.outcome },
      ),
    });
  }
  return { producer: PRODUCER_NAME, cases };
}

main().catch((e) => {
  process.stderr.write(`conformance: ${e?.stack ?? e}\n`);
  process.exit(1);
});
