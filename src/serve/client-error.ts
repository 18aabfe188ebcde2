/**
 * The answer to a connection whose request Node's HTTP parser refused before
 * any route saw it: headers past the server's limit → 431, headers that never
 * finished in time → 408, anything else the parser cannot read → 400. Each is
 * the same JSON error body as every other refusal, then the connection closes.
 *
 * Why not fastify's default (write the answer, then `socket.destroy()`): the
 * client is usually still sending (the rest of its oversized headers, its
 * body), and closing a socket whose receive queue holds unread bytes makes
 * Linux send RST instead of FIN. A client that has not read the answer by then
 * sees `ECONNRESET` instead of the 431: Node 24's client nearly always, Node
 * 20's in a race. So the answer is followed by a half-close (FIN), the parser
 * goes on reading and discarding what still arrives, and the socket is
 * destroyed once the client has closed its side, or after LINGER_MS at most.
 */
import type { Socket } from 'node:net';

import { describeError, KvtError } from '../errors.ts';
import { errorBody } from './http-errors.ts';

/** The longest a refused connection is kept reading after the answer (nginx's lingering_time, much shorter). */
export const LINGER_MS = 2000;

const answered = new WeakSet<Socket>();

/** The refusal for a parser error: status, code and message. */
export function describeClientError(error: { code?: string }): KvtError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new KvtError('KVT_ERR_REQUEST_HEADERS_TOO_LARGE', 'the request headers are larger than the server accepts (Node\'s --max-http-header-size, 16 KiB by default)', { param: 'headers' });
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new KvtError('KVT_ERR_REQUEST_TIMEOUT', 'the request did not arrive in full within the server\'s request timeout');
    default:
      return new KvtError('KVT_ERR_REQUEST_MALFORMED', `the request is not valid HTTP/1.1 (${String(error.code ?? 'parse error')})`);
  }
}

/** The raw HTTP/1.1 response written to the socket (there is no reply object at this point). */
export function clientErrorResponse(refusal: KvtError): string {
  const described = describeError(refusal);
  return rawErrorResponse(described.status, JSON.stringify(errorBody(described, false)));
}

/** A complete `Connection: close` response carrying a JSON error body. */
export function rawErrorResponse(status: number, body: string): string {
  const reason = STATUS_TEXT[status] ?? 'Bad Request';
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
}

/**
 * Writes `response`, half-closes (FIN), and keeps the socket until the client
 * closes its side or LINGER_MS passed; whoever feeds the socket's bytes to a
 * reader must keep discarding them meanwhile (the HTTP parser does).
 */
export function answerAndLinger(socket: Socket, response: string): void {
  const linger = setTimeout(() => socket.destroy(), LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
  // The client's FIN after it read the answer: nothing more will come.
  socket.once('end', () => socket.destroy());
  socket.end(response);
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 413: 'Payload Too Large', 431: 'Request Header Fields Too Large' };

/**
 * A fastify `clientErrorHandler`. `onRefused` counts the refusal (metrics).
 * Node calls it again for every chunk the failed parser is handed afterwards:
 * only the first call answers.
 */
export function clientErrorHandler(onRefused: (code: string) => void): (error: Error & { code?: string }, socket: Socket) => void {
  return (error, socket) => {
    if (answered.has(socket)) return;
    answered.add(socket);
    // A reset connection is gone; nothing to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    // A response already under way on this socket would be corrupted by a second status line (Node's own default checks the same).
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!socket.writable || inFlight?.headersSent === true) {
      socket.destroy();
      return;
    }
    const refusal = describeClientError(error);
    onRefused(refusal.code);
    answerAndLinger(socket, clientErrorResponse(refusal));
  };
}
