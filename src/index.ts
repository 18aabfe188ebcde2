// kvtier's service layer: the app, the workers, config and the error registry.
export { buildApp, type BuiltApp } from './serve/index.ts';
export { loadConfig, defaultConfig, type Config } from './config.ts';
export { ERROR_REGISTRY, KvtError, describeError, specFor, type KvtErrorCode } from './errors.ts';
export { startBullmqWorker, EngineHost, InprocRunner, BullmqRunner } from './workers/index.ts';
