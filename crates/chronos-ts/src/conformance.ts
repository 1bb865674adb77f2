/**
 * Runs the contract's enqueue vectors (`v1/enqueue.json`) and prints one JSON report on
 * stdout, for `tests/tests/producer_contract.rs`:
 *
 *   node dist/src/conformance.js --redis URL --namespace NS --vectors PATH/enqueue.json
 */
import { readFileSync } from "node:fs";
import Redis from "ioredis";
import { EnqueueError, EnqueueOptions, PRODUCER_NAME, Producer } from "./producer";

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

const ERRORS: Record<string, string> = { duplicate: "duplicate", id_conflict: "id_conflict" };

async function main(): Promise<void> {
  const vectors = JSON.parse(readFileSync(arg("vectors"), "utf8"));
  const client = new Redis(arg("redis"));
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
        r instanceof EnqueueError
          ? {
              error: ERRORS[r.code] ?? (r.code.startsWith("invalid") ? "invalid" : "other"),
              message: r.message,
            }
          : { id: r.id, state: r.state, outcome: r.outcome },
      ),
    });
  }
  process.stdout.write(JSON.stringify({ producer: PRODUCER_NAME, cases }) + "\n");
  await client.quit();
}

main().catch((e) => {
  process.stderr.write(`conformance: ${e?.stack ?? e}\n`);
  process.exit(1);
});
