/**
 * Registers the CUDA backend with native/index.ts's createBackend()
 * (KVTIER_DEVICE=auto|cpu|cuda). Import this module once at start-up, e.g.
 * `import 'native/cuda/register.ts'`; it is a separate module (not imported
 * by native/index.ts) so that the CPU-only path never loads the CUDA addon
 * and no import cycle forms.
 */
import { registerBackend } from '../index.ts';
import { cudaAvailability } from './cuda-addon.ts';
import { CudaBackend } from './cuda-backend.ts';

registerBackend('cuda', {
  unavailableReason() {
    const a = cudaAvailability();
    return a.addon && a.devices > 0 ? null : a.reason;
  },
  create() {
    return CudaBackend.open();
  },
});
