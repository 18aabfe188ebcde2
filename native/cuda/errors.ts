/**
 * Typed errors of the CUDA backend. `code` is stable; the message says what
 * to do. Errors raised inside the addon arrive with codes
 * KVT_ERR_NATIVE_CUDA_{NO_DEVICE,INVALID,OOM,UNSUPPORTED,RUNTIME}.
 */
export type CudaErrorCode =
  | 'KVT_ERR_NATIVE_CUDA_UNAVAILABLE'
  | 'KVT_ERR_NATIVE_DEVICE_INVALID'
  | 'KVT_ERR_NATIVE_CUDA_NO_DEVICE'
  | 'KVT_ERR_NATIVE_CUDA_INVALID'
  | 'KVT_ERR_NATIVE_CUDA_OOM'
  | 'KVT_ERR_NATIVE_CUDA_UNSUPPORTED'
  | 'KVT_ERR_NATIVE_CUDA_RUNTIME';

export class CudaBackendError extends Error {
  readonly code: CudaErrorCode;
  constructor(code: CudaErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CudaBackendError';
    this.code = code;
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
