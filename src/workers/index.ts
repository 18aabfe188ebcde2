export { modelIdOf, type RequestSpec, type JobEvent, type SamplingSpec, type JobStats, engineThreadInit, type EngineThreadInit, patchPolicyDoc, type PolicyPatch } from '../scheduler/index.ts';
export type { JobRunner, RunnerStatus, AdminCall } from './job-runner.ts';
export { EngineHost, type EngineInfo, type EngineLog } from './engine-host.ts';
export { tsWorker } from './ts-worker.ts';
export { InprocRunner } from './inproc-runner.ts';
export { BullmqRunner } from './bullmq-runner.ts';
export { CANCEL_CHANNEL, QUEUE_NAME, roleQueueName, workerQueueName, type QueuedJob, type PublishedEvent } from './bullmq-protocol.ts';
export { startBullmqWorker, type BullmqWorkerOptions, type RunningWorker } from './bullmq-worker.ts';
export type { ReplyRecords } from './reply-records-writer.ts';
