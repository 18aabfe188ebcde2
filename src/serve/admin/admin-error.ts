/**
 * Admin faults with their HTTP status. The codes are KVT_ERR_ADMIN_*; the
 * routes send them in the same `{error: {message, type, param, code, hint}}`
 * body as every other route.
 */
export type AdminErrorCode = 'KVT_ERR_ADMIN_BAD_REQUEST' | 'KVT_ERR_ADMIN_NOT_FOUND' | 'KVT_ERR_ADMIN_UNAVAILABLE';

const STATUS: Record<AdminErrorCode, { status: number; type: string; hint: string }> = {
  KVT_ERR_ADMIN_BAD_REQUEST: { status: 400, type: 'invalid_request_error', hint: 'fix the named field; see kvtier --help' },
  KVT_ERR_ADMIN_NOT_FOUND: { status: 404, type: 'not_found_error', hint: 'kvtier ls lists the blocks this node knows' },
  KVT_ERR_ADMIN_UNAVAILABLE: { status: 503, type: 'overloaded_error', hint: 'the cache tier is not open on this server; see its log' },
};

export class AdminError extends Error {
  readonly status: number;
  readonly type: string;
  readonly hint: string;
  constructor(
    readonly code: AdminErrorCode,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = 'AdminError';
    ({ status: this.status, type: this.type, hint: this.hint } = STATUS[code]);
  }

  body(): Record<string, unknown> {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code, hint: this.hint } };
  }
}
