export { buildApp, type BuiltApp, type BuildAppOptions } from './app.ts';
export { TenantAuth, resolveTrafficClass, parseKeysFile, ANONYMOUS_TENANT, type TenantIdentity } from './auth.ts';
export { InferenceService, type GenerateEvent, type GenerateOptions } from './inference-service.ts';
export { ServeMetrics } from './metrics.ts';
export type { ServeContext } from './context.ts';
