/**
 * The e2e bench's overhead sample (bench/e2e.ts): short non-streamed chat requests one at a
 * time, client wall time − the worker's own time (x-kvtier-worker-ms), by two clients.
 */
import http from 'node:http';

export type OverheadClient = 'http' | 'fetch';

/**
 * Overhead of short non-streamed requests sent one at a time, by one of two clients:
 * `http`, a keep-alive node:http agent (the headline: it costs ~0.3 ms a round trip against a
 * bare Fastify route here), or `fetch`, undici's WHATWG fetch (~1.3 ms against the same route:
 * Request/Response objects and web streams, all run on this process's event loop, which the
 * server under test shares). The server's work is the same for both.
 */
async function measureOverhead(url: string, key: string, client: OverheadClient, model: string, requests: number): Promise<number[]> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const overheads: number[] = [];
  try {
    for (let i = 0; i < requests + 3; i++) {
      const body = JSON.stringify({ model, messages: [{ role: 'user', content: `ping ${i % 4}` }], max_tokens: 1, temperature: 0 });
      const started = performance.now();
      const { status, workerMs } = client === 'http' ? await postWithAgent(agent, `${url}/v1/chat/completions`, key, body) : await postWithFetch(`${url}/v1/chat/completions`, key, body);
      const wall = performance.now() - started;
      if (status !== 200 || !Number.isFinite(workerMs)) throw new Error(`overhead request failed: HTTP ${status}`);
      if (i >= 3) overheads.push(wall - workerMs); // the first few warm up the JIT and connections
    }
  } finally {
    agent.destroy();
  }
  return overheads;
}

interface OverheadReply {
  status: number;
  workerMs: number;
}

function postWithAgent(agent: http.Agent, url: string, key: string, body: string): Promise<OverheadReply> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'content-length': Buffer.byteLength(body) } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('error', reject);
      response.on('end', () => {
        JSON.parse(text);
        resolve({ status: response.statusCode ?? 0, workerMs: Number(response.headers['x-kvtier-worker-ms']) });
      });
    });
    request.on('error', reject);
    request.end(body);
  });
}

async function postWithFetch(url: string, key: string, body: string): Promise<OverheadReply> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body });
  await response.json();
  return { status: response.status, workerMs: Number(response.headers.get('x-kvtier-worker-ms')) };
}

/** Both clients' samples, alternated in halves so neither gets only the quieter stretch of a noisy box. */
export async function measureOverheads(url: string, key: string, model: string, requests: number): Promise<Record<OverheadClient, number[]>> {
  const samples: Record<OverheadClient, number[]> = { http: [], fetch: [] };
  for (const client of ['http', 'fetch', 'fetch', 'http'] as const) samples[client].push(...(await measureOverhead(url, key, client, model, requests)));
  return samples;
}
