/**
 * One HTTP/1.1 request over a plain socket, request line exactly as given:
 * fetch and undici normalise paths (dot segments, case of escapes), and an
 * attacker's client does not.
 */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: string;
  body: string;
}

export function rawRequest(url: string, method: string, target: string, options: { headers?: Record<string, string>; body?: string } = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  const body = options.body ?? '';
  const headers = { host: `${hostname}:${port}`, connection: 'close', ...(body !== '' ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}), ...options.headers };
  const head = `${method} ${target} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? NaN);
      resolve({ status, headers: split === -1 ? text : text.slice(0, split), body: split === -1 ? '' : text.slice(split + 4) });
    });
    socket.write(head + body);
  });
}
