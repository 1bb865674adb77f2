/**
 * `@chronos-rs/producer`: enqueue tasks that chronos-rs workers run, from Node.js, under
 * producer contract v1 (`crates/chronos-protocol/contract/CONTRACT.md`).
 */
export {
  Producer,
  ProducerOptions,
  EnqueueOptions,
  TaskSpec,
  TaskInfo,
  EnqueueError,
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
export { Envelope, encodeEnvelope, uniqueKey, fingerprint } from "./envelope";
