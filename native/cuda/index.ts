// The CUDA backend of kvtier's engine core (optional: the addon exists only
// where nvcc was found at install time).
export { CudaBackendError, type CudaErrorCode } from './errors.ts';
export {
  cudaAddonPath,
  cudaAvailability,
  resolveDevice,
  type CudaAddon,
  type CudaAvailability,
  type CudaView,
  type DeviceKind,
  type DeviceSetting,
} from './cuda-addon.ts';
export {
  CudaContext,
  CudaDtype,
  CudaModel,
  RopeMode,
  type CudaLlamaConfig,
  type KvPoolShape,
} from './cuda-context.ts';
export { CudaBackend, createCudaBackend } from './cuda-backend.ts';
