/**
 * `@chronos-rs/producer`: enqueue tasks that chronos-rs workers run, from Node.js, under
 * producer contract v1 (`crates/chronos-protocol/contract/CONTRACT.md`).
 */
export {
  Producer,
  EnqueueError,
  ValidationError,
  InvalidQueue,
  InvalidTaskId,
  PayloadTooLarge,
  InvalidOption,
  DuplicateTask,
  TaskIdConflict,
  ProducerError,
  ConnectionLost,
  checkQueue,
  checkTaskId,
  VERSION,
  PRODUCER_NAME,
} from "./producer";
export type { ProducerOptions, EnqueueOptions, TaskSpec, TaskInfo, TaskState } from "./producer";
export { encodeEnvelope, uniqueKey, fingerprint, EnvelopeRangeError, DEFAULT_MAX_RETRY } from "./envelope";
export type { Envelope } from "./envelope";
