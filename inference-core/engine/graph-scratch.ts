/**
 * A graph's scratch activations: one backend buffer each, allocated once for
 * `maxRows` rows (the logit ones for `maxLogitRows`) and reused by every
 * forward call, which views its first n rows.
 */
import type { Backend, TensorHandle } from '../../native/index.ts';

/** Values per row of each activation. */
export type RowWidths<K extends string> = Record<K, number>;

/** One buffer per activation: each row one of `rows` × maxRows values, each logit one of `logits` × maxLogitRows. */
export function allocScratch<R extends string, L extends string>(
  b: Backend,
  rows: RowWidths<R>,
  maxRows: number,
  logits: RowWidths<L>,
  maxLogitRows: number,
): Record<R | L, TensorHandle> {
  const out = {} as Record<R | L, TensorHandle>;
  for (const [name, width] of Object.entries(rows) as [R, number][]) out[name] = b.alloc(maxRows * width);
  for (const [name, width] of Object.entries(logits) as [L, number][]) out[name] = b.alloc(maxLogitRows * width);
  return out;
}

/** The first n rows of each of the row activations `widths` names. */
export function firstRows<R extends string>(b: Backend, s: Record<R, TensorHandle>, widths: RowWidths<R>, n: number): Record<R, TensorHandle> {
  const out = {} as Record<R, TensorHandle>;
  for (const [name, width] of Object.entries(widths) as [R, number][]) out[name] = b.view(s[name], 0, n * width);
  return out;
}
