export { modelIdOf, type PrefillJob, type JobEvent, type JobSampling, type JobStats } from './job.ts';
export type { JobRunner, RunnerStatus, AdminCall } from './job-runner.ts';
export { engineThreadInit, type EngineThreadInit } from './engine-thread-protocol.ts';
export { EngineHost, type EngineInfo, type EngineLog } from './engine-host.ts';
export { InprocRunner } from './inproc-runner.ts';
export { PrefillScheduler, type SchedulerOptions } from './prefill-scheduler.ts';
export { adminCall } from './tier-admin.ts';
export { BullmqRunner, QUEUE_NAME, roleQueueName, workerQueueName, type QueuedJob, type PublishedEvent } from './bullmq-runner.ts';
export { startBullmqWorker, type RunningWorker } from './bullmq-worker.ts';
