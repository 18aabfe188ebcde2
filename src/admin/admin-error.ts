import { specFor } from '../errors.ts';

/**
 * Admin faults. The codes are KVT_ERR_ADMIN_*, with their status and hint in
 * the one registry (src/errors.ts); the routes send them in the same
 * `{error: {message, type, param, code, hint}}` body as every other route.
 */
export type AdminErrorCode = 'KVT_ERR_ADMIN_BAD_REQUEST' | 'KVT_ERR_ADMIN_NOT_FOUND' | 'KVT_ERR_ADMIN_UNAVAILABLE';

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
    ({ status: this.status, type: this.type, hint: this.hint } = specFor(code));
  }

  body(): Record<string, unknown> {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code, hint: this.hint } };
  }
}
