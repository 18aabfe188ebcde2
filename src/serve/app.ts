/**
 * buildApp(config): the fastify app of the API process.
 *
 *   auth → tenant ─ schema ─ recipe (prompt tokens) ─ InferenceService ─ JobRunner
 *                                                                         ├─ in-process engine thread (embedded default)
 *                                                                         └─ BullMQ → `kvtier worker` processes (REDIS_URL)
 */
import Fastify, { type FastifyInstance } from 'fastify';

import type { Config } from '../config.ts';
import { KvtError } from '../errors.ts';
import { resolveModelPath } from '../../inference-core/index.ts';
import { promptCodecFromGgufFile, ReplyMemory, type PromptCodec } from '../recipe/index.ts';
import { BullmqRunner, EngineHost, engineThreadInit, InprocRunner, modelIdOf, type JobRunner } from '../workers/index.ts';
import { TenantAuth } from './auth.ts';
import { AdminLogin } from './admin-login.ts';
import type { ServeContext } from './context.ts';
import { describeHttpError, sendError } from './http-errors.ts';
import { clientErrorHandler } from './client-error.ts';
import { isBodyTooLarge, refuseBodyTooLarge } from './body-too-large.ts';
import { InferenceService } from './inference-service.ts';
import { PolicyView } from './policy-view.ts';
import { PromptService } from './prompt-service.ts';
import { RedisReplyMemory } from './redis-reply-memory.ts';
import { ServeMetrics } from './metrics.ts';
import { authenticateApiRoutes } from './request-limits.ts';
import { useStrictUtf8Json } from './json-body.ts';
import { adminPlugin, setupAdmin } from './admin/index.ts';
import { registerAnthropicMessages } from './routes/anthropic-messages.ts';
import { registerOpenAiChat } from './routes/openai-chat.ts';
import { registerOpenAiCompletions } from './routes/openai-completions.ts';
import { registerOpenAiResponses } from './routes/openai-responses.ts';
import { registerServiceRoutes } from './routes/service-routes.ts';

export interface BuiltApp {
  app: FastifyInstance;
  context: ServeContext;
  /** The admin token in force and, on a loopback listener without KVTIER_ADMIN_TOKEN, the generated one and its login link. */
  adminLogin: AdminLogin;
  /** Closes the HTTP server, the runner (engine thread or queue connections). */
  close(): Promise<void>;
}

export interface BuildAppOptions {
  /** Pino options or false (tests keep logs quiet). */
  logger?: boolean | { level: string };
  /** The clock stored responses expire by (embedded store); tests move it instead of waiting a TTL out. */
  now?: () => number;
}

export async function buildApp(config: Config, options: BuildAppOptions = {}): Promise<BuiltApp> {
  const metrics = new ServeMetrics();
  const app = Fastify({
    logger: options.logger ?? { level: config.logLevel },
    bodyLimit: config.maxBodyBytes,
    // allowUnionTypes: a field such as `stop` is one schema over string | array | null, so its error names the limit hit.
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false, allowUnionTypes: true } },
    return503OnClosing: true,
    // The router's own refusals (a path that does not percent-decode, a path parameter past its length) in our error body.
    frameworkErrors: (error, request, reply) => sendError(request, reply, frameworkError(error)),
    // A request the HTTP parser refused (headers past the limit → 431): our JSON error, then a graceful close.
    clientErrorHandler: clientErrorHandler((code) => metrics.errors.inc({ code })),
  });
  useStrictUtf8Json(app);
  const log = (level: 'info' | 'warn' | 'error', message: string) => app.log[level](message);
  const adminLogin = AdminLogin.forListener(config.adminToken, config.host);
  const auth = TenantAuth.load({ apiKeysFile: config.apiKeysFile, adminToken: adminLogin.token, dataDir: config.dataDir });
  const modelPath = resolveModelPath(config.model, { dataDir: config.dataDir });
  const codec: PromptCodec = promptCodecFromGgufFile(modelPath);
  const vocabSize = codec.vocabSize;

  let runner: JobRunner;
  let fingerprint: string;
  let contextLength: number;
  if (config.redisUrl) {
    const bullmq = await BullmqRunner.connect(config, log);
    runner = bullmq;
    ({ fingerprint, contextLength } = await bullmq.modelInfo(modelPath));
  } else {
    // GC on the engine thread's timer at config.gcIntervalMs (KVTIER_GC_INTERVAL_MS; engineThreadInit passes it when there is no Redis).
    const host = await EngineHost.start(engineThreadInit(config, { redisUrl: null }), log);
    runner = new InprocRunner(host, { maxQueueDepth: config.maxQueueDepth, maxBatch: config.maxBatch });
    fingerprint = host.info.fingerprint;
    contextLength = host.info.contextLength;
  }

  // With Redis the reply memory is the cluster's (a turn's next turn may reach another API process); embedded, this process's.
  const memory = new ReplyMemory(undefined, config.redisUrl ? new RedisReplyMemory(config.redisUrl, log) : null);
  const modelId = modelIdOf(config.model);

  const prompts = new PromptService({ codec, memory, modelPath, contextLength });
  const service = new InferenceService({ codec, runner, memory, metrics, requestTimeoutMs: config.requestTimeoutMs });
  const context: ServeContext = {
    config,
    modelId,
    fingerprint: `fp_${fingerprint.slice(0, 16)}`,
    contextLength,
    vocabSize,
    codec,
    prompts,
    service,
    runner,
    auth,
    metrics,
    policy: new PolicyView(() => runner.policy()),
    defaultMaxTokens: 256,
  };

  app.setErrorHandler((error, request, reply) => {
    const named = isBodyTooLarge(error) ? bodyTooLarge(config.maxBodyBytes) : error;
    metrics.errors.inc({ code: describeHttpError(named).code });
    if (named !== error) {
      // The client is still sending: answer, then read the rest before closing (body-too-large.ts).
      metrics.requests.inc({ route: request.routeOptions.url ?? 'unmatched', status: '413' });
      return refuseBodyTooLarge(request, reply, named);
    }
    return sendError(request, reply, named);
  });
  app.setNotFoundHandler((request, reply) => {
    metrics.errors.inc({ code: 'KVT_ERR_ROUTE_NOT_FOUND' });
    return sendError(request, reply, new KvtError('KVT_ERR_ROUTE_NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`, { param: 'url' }));
  });
  // Authentication before the body is read or validated: 401 whatever the body.
  app.addHook('onRequest', authenticateApiRoutes(context));
  app.addHook('onResponse', async (request, reply) => {
    metrics.requests.inc({ route: request.routeOptions.url ?? 'unmatched', status: String(reply.statusCode) });
  });

  registerServiceRoutes(app, context, Date.now());
  registerOpenAiChat(app, context);
  registerOpenAiCompletions(app, context);
  registerOpenAiResponses(app, context, options.now ?? Date.now);
  registerAnthropicMessages(app, context);
  // The stats recorder, the admin service and /dashboard; every /admin/* route sits in the guarded admin plugin.
  const admin = await setupAdmin(app, context);
  adminLogin.register(app);
  await app.register(adminPlugin({ ctx: context, service: admin.service }));

  return {
    app,
    context,
    adminLogin,
    async close() {
      await app.close();
      await admin.close();
      await prompts.close();
      await memory.close();
      await runner.close();
    },
  };
}

function frameworkError(error: { code?: string; message: string }): unknown {
  if (error.code === 'FST_ERR_BAD_URL' || error.code === 'FST_ERR_MAX_PARAM_LENGTH') return new KvtError('KVT_ERR_REQUEST_INVALID', `the request URL is malformed: ${error.message}`, { param: 'url' });
  return error;
}

function bodyTooLarge(limit: number): KvtError {
  return new KvtError('KVT_ERR_REQUEST_TOO_LARGE', `the request body is larger than ${limit} bytes (KVTIER_MAX_BODY_BYTES)`, { param: 'body' });
}
