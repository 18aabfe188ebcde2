/** Real traffic through the API for the admin, CLI and dashboard tests. */
import { ADMIN_TOKEN } from './server-fixture.ts';

export const LONG_SYSTEM = 'You are kvtier, a terse assistant that explains caches. ' + 'Keep answers short, name the cached prefix, never apologise. '.repeat(14);

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_cache_hit_tokens: number;
  prompt_cache_miss_tokens: number;
}

export async function chat(url: string, key: string, user: string, options: { trafficClass?: string; maxTokens?: number } = {}): Promise<ChatUsage> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, ...(options.trafficClass ? { 'x-kvtier-class': options.trafficClass } : {}) },
    body: JSON.stringify({
      model: 'synthetic:tiny',
      messages: [
        { role: 'system', content: LONG_SYSTEM },
        { role: 'user', content: user },
      ],
      max_tokens: options.maxTokens ?? 6,
      temperature: 0,
    }),
  });
  if (!response.ok) throw new Error(`chat failed: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { usage: ChatUsage }).usage;
}

export async function admin<T = unknown>(url: string, path: string, init: { method?: string; body?: unknown; token?: string } = {}): Promise<{ status: number; body: T }> {
  const response = await fetch(`${url}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${init.token ?? ADMIN_TOKEN}`, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
  });
  const text = await response.text();
  return { status: response.status, body: (text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : text) as T };
}

/** Waits until the tier has written (and indexed) the blocks of earlier requests. */
export async function waitFor(check: () => Promise<boolean>, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
