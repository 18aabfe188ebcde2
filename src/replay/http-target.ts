/**
 * A running kvtier server as a replay target (`kvtier replay --url`): each
 * request is a POST /v1/completions whose prompt is the token ids
 * synthesised for its block ids (below the server's vocabulary, read from
 * GET /v1/models), plus one tail token so that every full block can hit
 * (a server recomputes at least the last prompt token). The hit is the
 * usage's `cached_tokens`, in trace blocks.
 *
 * The server keeps its own clock and policy: a time-compressed replay
 * judges the server's TTLs on compressed time, and `--ttl` cannot be set
 * from here (`kvtier policy` sets the server's). One API key = one tenant's
 * namespace, so a trace with several tenants is refused by the command.
 */
import type { ReplayRequest } from './trace.ts';

export class ReplayServerError extends Error {
  readonly code = 'KVT_ERR_REPLAY_SERVER';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReplayServerError';
  }
}

export interface HttpTargetOptions {
  /** The server's base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  /** API key (Authorization: Bearer); absent = none sent (a server with no keys file). */
  apiKey?: string;
  /** Admin token: stored bytes are read from GET /admin/stats when given. */
  adminToken?: string;
  /** Tokens per trace block id. */
  blockTokens: number;
  fetch?: typeof fetch;
}

interface ModelInfo {
  id: string;
  vocabSize: number;
  contextLength: number;
}

export class HttpTarget {
  private readonly fetch: typeof fetch;
  readonly base: string;

  private constructor(
    private readonly options: HttpTargetOptions,
    readonly model: ModelInfo,
  ) {
    this.fetch = options.fetch ?? globalThis.fetch;
    this.base = options.url.replace(/\/+$/, '');
  }

  /** Reads the served model (id, vocabulary, context) from GET /v1/models. */
  static async open(options: HttpTargetOptions): Promise<HttpTarget> {
    const base = options.url.replace(/\/+$/, '');
    let parsed: URL;
    try {
      parsed = new URL(base);
    } catch {
      throw new ReplayServerError(`--url ${options.url} is not a URL; give the server's base URL, e.g. http://127.0.0.1:8080`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new ReplayServerError(`--url ${options.url}: only http:// and https:// servers are replayed against`);
    const body = await call(options.fetch ?? globalThis.fetch, `${base}/v1/models`, { headers: authHeaders(options.apiKey) });
    const entry = (body as { data?: Array<Record<string, unknown>> }).data?.[0];
    const vocabSize = entry?.vocab_size;
    const contextLength = entry?.context_length;
    if (typeof entry?.id !== 'string' || typeof vocabSize !== 'number' || !Number.isInteger(vocabSize) || vocabSize < 2 || typeof contextLength !== 'number') {
      throw new ReplayServerError(`${base}/v1/models names no model with vocab_size and context_length (got ${JSON.stringify(entry ?? body).slice(0, 200)}); --url needs a kvtier server`);
    }
    return new HttpTarget(options, { id: entry.id, vocabSize, contextLength });
  }

  /** Synthesised tokens stay below the served vocabulary. */
  get vocab(): number {
    return this.model.vocabSize;
  }

  /** The server's clock is its own. */
  setTime(): void {}

  /** Requests are sent one at a time and answered after the server stored (or queued) their blocks. */
  async settle(): Promise<void> {}

  backlogged(): boolean {
    return false;
  }

  async serve(request: ReplayRequest, tokens: Uint32Array): Promise<number> {
    const prompt = new Array<number>(tokens.length + 1);
    for (let i = 0; i < tokens.length; i++) prompt[i] = tokens[i];
    // The tail sits past the last full block, so it is never cached; it only makes every full block hittable.
    prompt[tokens.length] = request.index % this.model.vocabSize;
    if (prompt.length + 1 > this.model.contextLength) {
      throw new ReplayServerError(
        `trace request ${request.index + 1} has ${tokens.length} tokens of full blocks; the server's context is ${this.model.contextLength} tokens: replay fewer or smaller blocks (--block-tokens) or serve a model with a longer context`,
      );
    }
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-kvtier-class': request.trafficClass, ...authHeaders(this.options.apiKey) };
    const body = await call(this.fetch, `${this.base}/v1/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ model: this.model.id, prompt, max_tokens: 1, temperature: 0 }),
    });
    const cached = (body as { usage?: { prompt_tokens_details?: { cached_tokens?: unknown } } }).usage?.prompt_tokens_details?.cached_tokens;
    if (typeof cached !== 'number' || !Number.isInteger(cached) || cached < 0) {
      throw new ReplayServerError(`${this.base}/v1/completions answered without usage.prompt_tokens_details.cached_tokens (trace request ${request.index + 1}); --url needs a kvtier server`);
    }
    return Math.min(request.blocks.length, Math.floor(cached / this.options.blockTokens));
  }

  /** The server's stored bytes and blocks (GET /admin/stats); zeros when no admin token was given. */
  async stored(): Promise<{ bytes: number; blocks: number }> {
    if (this.options.adminToken === undefined) return { bytes: 0, blocks: 0 };
    const body = (await call(this.fetch, `${this.base}/admin/stats`, { headers: { authorization: `Bearer ${this.options.adminToken}` } })) as {
      tier?: { usage?: { bytes?: { g?: number }; blocks?: { g?: number } } };
    };
    return { bytes: body.tier?.usage?.bytes?.g ?? 0, blocks: body.tier?.usage?.blocks?.g ?? 0 };
  }

  async close(): Promise<void> {}
}

function authHeaders(apiKey: string | undefined): Record<string, string> {
  return apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
}

/** One HTTP call; a refused connection or a non-2xx answer is a ReplayServerError saying what the server said. */
async function call(fetchFn: typeof fetch, url: string, init: RequestInit): Promise<unknown> {
  let response: Response;
  try {
    response = await fetchFn(url, init);
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    throw new ReplayServerError(`cannot reach ${url}: ${cause?.code ?? cause?.message ?? (error as Error).message}; is the server running (kvtier serve) at that address?`, { cause: error });
  }
  const text = await response.text();
  if (!response.ok) {
    let detail = text.slice(0, 300);
    try {
      const parsed = JSON.parse(text) as { error?: { message?: string; code?: string } };
      if (parsed.error?.message) detail = `${parsed.error.message}${parsed.error.code ? ` [${parsed.error.code}]` : ''}`;
    } catch {
      // Not JSON: the raw text (cut) says it.
    }
    const hint = response.status === 401 || response.status === 403 ? ' (pass --api-key KEY, or --token for the admin API)' : '';
    throw new ReplayServerError(`${init.method ?? 'GET'} ${url} answered ${response.status}: ${detail}${hint}`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new ReplayServerError(`${url} answered ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`);
  }
}
