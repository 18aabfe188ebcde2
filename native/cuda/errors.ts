/**
 * Typed errors of the CUDA backend. `code` is stable; the message says what
 * to do. Errors raised inside the addon arrive with codes
 * KVT_ERR_NATIVE_CUDA_{NO_DEVICE,INVALID,OOM,UNSUPPORTED,RUNTIME}.
 */
import { NativeError } from '../backend.ts';

export type CudaErrorCode =
  | 'KVT_ERR_NATIVE_NO_CUDA'
  | 'KVT_ERR_NATIVE_DEVICE'
  | 'KVT_ERR_NATIVE_CUDA_NO_DEVICE'
  | 'KVT_ERR_NATIVE_CUDA_INVALID'
  | 'KVT_ERR_NATIVE_CUDA_OOM'
  | 'KVT_ERR_NATIVE_CUDA_UNSUPPORTED'
  | 'KVT_ERR_NATIVE_CUDA_RUNTIME';

/** A NativeError (native/backend.ts) raised by the CUDA backend. */
export class CudaBackendError extends NativeError {
  declare readonly code: CudaErrorCode;
  constructor(code: CudaErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message);
    this.name = 'CudaBackendError';
    if (options?.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}

const addonCodes = new Set<string>([
  'KVT_ERR_NATIVE_CUDA_NO_DEVICE',
  'KVT_ERR_NATIVE_CUDA_INVALID',
  'KVT_ERR_NATIVE_CUDA_OOM',
  'KVT_ERR_NATIVE_CUDA_UNSUPPORTED',
  'KVT_ERR_NATIVE_CUDA_RUNTIME',
]);

/** Runs an addon call, turning its coded JS errors into CudaBackendError. */
export function callAddon<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && addonCodes.has(code)) {
      throw new CudaBackendError(code as CudaErrorCode, `${what}: ${(err as Error).message}`, { cause: err });
    }
    throw err;
  }
}
