/** What every route needs, built once by buildApp. */
import type { Config } from '../config.ts';
import type { PromptCodec } from '../recipe/index.ts';
import type { JobRunner } from '../workers/index.ts';
import type { TenantAuth } from './auth.ts';
import type { InferenceService } from './inference-service.ts';
import type { PromptService } from './prompt-service.ts';
import type { ServeMetrics } from './metrics.ts';
import type { PolicyView } from './policy-view.ts';

export interface ServeContext {
  config: Config;
  modelId: string;
  /** Model fingerprint (system_fingerprint in OpenAI responses). */
  fingerprint: string;
  contextLength: number;
  vocabSize: number;
  codec: PromptCodec;
  /** Chat and completion prompts → tokens, large ones off the event loop. */
  prompts: PromptService;
  service: InferenceService;
  runner: JobRunner;
  auth: TenantAuth;
  metrics: ServeMetrics;
  /** The retention policy, kept current by its store's change notifications (policy-view.ts). */
  policy: PolicyView;
  defaultMaxTokens: number;
}
