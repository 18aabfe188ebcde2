/** Float KV payloads for the codec tests: f16 or f32 pages of smooth values with per-channel magnitudes. */
import { payloadBytesFor, type KvLayout } from '../../../../src/kvtier/index.ts';
import { f32ToF16 } from '../../../native/kv-codec-fixtures.ts';

export function floatPayload(layout: KvLayout, seed: number, tokens = layout.tokensPerBlock): Uint8Array {
  const bytes = payloadBytesFor(layout, tokens);
  const n = bytes / (layout.dtype === 'f32' ? 4 : 2);
  let s = seed >>> 0 || 1;
  const next = () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32 - 0.5;
  };
  if (layout.dtype === 'f32') {
    const x = new Float32Array(n);
    for (let i = 0; i < n; i++) x[i] = next() * (0.1 + (i % layout.headDim) * 0.05);
    return new Uint8Array(x.buffer);
  }
  const h = new Uint16Array(n);
  for (let i = 0; i < n; i++) h[i] = f32ToF16(next() * (0.1 + (i % layout.headDim) * 0.05));
  return new Uint8Array(h.buffer);
}
