/**
 * The admin API over HTTP, for `kvtier … --url http://host:8080`. Every
 * failure becomes a CliError with one line an operator can act on: the
 * server is unreachable, the token is wrong, or the server's own message.
 */
import type { GcReport, RetentionPolicyDoc } from '../kvtier/index.ts';
import type {
  AdminApi,
  AdminProgress,
  BlockDetail,
  BlockFilter,
  BlockListing,
  OverviewResponse,
  PolicyEdit,
  PolicyEditResult,
  PurgeFilter,
  PurgeReport,
} from '../admin/index.ts';
import { CliError } from './commands/cli-error.ts';

const REQUEST_TIMEOUT_MS = 30_000;

export class HttpAdminClient implements AdminApi {
  readonly target: string;
  private readonly base: URL;

  constructor(
    url: string,
    private readonly token: string,
  ) {
    let parsed: URL;
    try {
      parsed = new URL(url);
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('scheme');
    } catch {
      throw new CliError('KVT_ERR_CLI_BAD_VALUE', `--url ${url} is not an http(s) URL; use e.g. --url http://127.0.0.1:8080`);
    }
    this.base = parsed;
    this.target = parsed.origin;
  }

  getPolicy(): Promise<RetentionPolicyDoc> {
    return this.json('GET', '/admin/policy');
  }

  editPolicy(edit: PolicyEdit): Promise<PolicyEditResult> {
    return this.json('POST', '/admin/policy/edit', edit);
  }

  overview(): Promise<OverviewResponse> {
    return this.json('GET', '/admin/stats/overview');
  }

  listBlocks(filter: BlockFilter & { limit: number }): Promise<BlockListing> {
    const query = new URLSearchParams({ limit: String(filter.limit) });
    if (filter.tenant !== undefined) query.set('tenant', filter.tenant);
    if (filter.trafficClass !== undefined) query.set('class', filter.trafficClass);
    if (filter.olderThanMs !== undefined) query.set('olderThanMs', String(filter.olderThanMs));
    return this.json('GET', `/admin/blocks?${query}`);
  }

  inspectBlock(key: string): Promise<BlockDetail> {
    return this.json('GET', `/admin/blocks/${encodeURIComponent(key)}`);
  }

  purge(filter: PurgeFilter, onProgress: (progress: AdminProgress) => void): Promise<PurgeReport> {
    const body: Record<string, unknown> = {};
    if (filter.tenant !== undefined) body.tenant = filter.tenant;
    if (filter.trafficClass !== undefined) body.class = filter.trafficClass;
    if (filter.olderThanMs !== undefined) body.olderThanMs = filter.olderThanMs;
    if (filter.all) body.all = true;
    return this.stream('/admin/blocks/purge', body, onProgress);
  }

  gc(options: { dryRun: boolean }, onProgress: (progress: AdminProgress) => void): Promise<GcReport> {
    return this.stream('/admin/gc/run', { dryRun: options.dryRun }, onProgress);
  }

  async close(): Promise<void> {}

  private async send(method: string, path: string, body: unknown, timeoutMs: number | null): Promise<Response> {
    const url = new URL(path, this.base);
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: timeoutMs === null ? undefined : AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const why = (error as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs! / 1000} s` : (cause?.code ?? cause?.message ?? (error as Error).message);
      throw new CliError('KVT_ERR_CLI_UNREACHABLE', `cannot reach the kvtier server at ${this.target} (${why}); is \`kvtier serve\` running there?`);
    }
    if (!response.ok) await this.fail(response);
    return response;
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const response = await this.send(method, path, body, REQUEST_TIMEOUT_MS);
    return (await response.json()) as T;
  }

  /** NDJSON: progress lines, then one done/error line. */
  private async stream<T>(path: string, body: unknown, onProgress: (progress: AdminProgress) => void): Promise<T> {
    const response = await this.send('POST', path, body, null);
    if (!response.body) throw new CliError('KVT_ERR_CLI_SERVER', `${this.target}${path} answered with no body`);
    const decoder = new TextDecoder();
    let buffered = '';
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      let newline: number;
      while ((newline = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, newline).trim();
        buffered = buffered.slice(newline + 1);
        if (line === '') continue;
        const message = JSON.parse(line) as { type: string; result?: T; error?: { code: string; message: string } } & AdminProgress;
        if (message.type === 'progress') onProgress(message);
        else if (message.type === 'done') return message.result as T;
        else if (message.type === 'error') throw new CliError(message.error?.code ?? 'KVT_ERR_CLI_SERVER', `${message.error?.message ?? 'the operation failed'} [${message.error?.code}]`, 1);
      }
    }
    throw new CliError('KVT_ERR_CLI_SERVER', `the server closed ${path} before reporting a result; see the server log`);
  }

  private async fail(response: Response): Promise<never> {
    let error: { code?: string; message?: string } = {};
    try {
      error = ((await response.json()) as { error?: typeof error }).error ?? {};
    } catch {
      // Not our JSON (a proxy's page): the status says enough.
    }
    const code = error.code ?? `HTTP_${response.status}`;
    if (response.status === 401 || code === 'KVT_ERR_AUTH_ADMIN_TOKEN') {
      throw new CliError('KVT_ERR_CLI_AUTH', `${this.target} refused the admin token; pass the server's KVTIER_ADMIN_TOKEN with --token or the KVTIER_ADMIN_TOKEN variable [${code}]`);
    }
    if (code === 'KVT_ERR_AUTH_ADMIN_DISABLED') {
      throw new CliError('KVT_ERR_CLI_AUTH', `${this.target} has the admin API disabled; restart it with KVTIER_ADMIN_TOKEN set [${code}]`);
    }
    if (response.status === 404 && code === 'KVT_ERR_ROUTE_NOT_FOUND') {
      throw new CliError('KVT_ERR_CLI_SERVER', `${this.target} has no ${new URL(response.url).pathname}; is it a kvtier server of this version? [${code}]`);
    }
    throw new CliError(code, `${error.message ?? `HTTP ${response.status}`} [${code}]`, 1);
  }
}
