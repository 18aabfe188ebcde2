/**
 * The 413 for a body past KVTIER_MAX_BODY_BYTES, on every route.
 *
 * Fastify refuses such a body as soon as its Content-Length (or the bytes
 * read so far) pass the limit, while the client is usually still sending. Node
 * then ends the response and closes the socket with the rest of the body
 * unread, the kernel answers the client's next bytes with RST, and a client
 * that writes its whole body before reading (Python's requests, curl, a raw
 * socket) gets EPIPE or ECONNRESET instead of the 413. So the answer is
 * written the way the 431 path writes its own (client-error.ts): the reply is
 * taken from fastify, the JSON error goes out with `Connection: close`, the
 * rest of the body is read and discarded, and the socket closes when the
 * client closes its side, or after LINGER_MS at most.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';

import { answerAndLinger, rawErrorResponse } from './client-error.ts';
import { errorBody, describeHttpError, isAnthropicRoute } from './http-errors.ts';

export function isBodyTooLarge(error: unknown): boolean {
  return (error as { code?: string } | null)?.code === 'FST_ERR_CTP_BODY_TOO_LARGE';
}

/** Answers `refusal` (a KVT_ERR_REQUEST_TOO_LARGE) on `request`'s socket and lingers; fastify sends nothing more. */
export function refuseBodyTooLarge(request: FastifyRequest, reply: FastifyReply, refusal: unknown): void {
  const described = describeHttpError(refusal);
  request.log.info({ code: described.code, param: described.param }, described.message);
  const body = JSON.stringify(errorBody(described, isAnthropicRoute(request.routeOptions?.url ?? request.url)));
  const socket = request.raw.socket;
  reply.hijack();
  // The parser goes on reading the body into the request stream: a flowing stream without listeners drops it.
  request.raw.resume();
  if (socket.destroyed || !socket.writable) return;
  answerAndLinger(socket, rawErrorResponse(described.status, body));
}
