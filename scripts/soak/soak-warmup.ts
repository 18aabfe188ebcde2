/**
 * When a soak's warm-up ends: the server's bounded memories fill first, and
 * RSS growth is only meaningful once they are full. What fills, and how the
 * soak knows it is full:
 *   - the tier's hot block cache (KVTIER_HOT_CACHE_BYTES): its bytes are read
 *     from GET /admin/stats every window; full = within 10 % of its budget;
 *   - the blocks being written (src/kvtier/block-flights.ts holds their bytes until
 *     each write lands, within the write-behind budget, 256 MiB): a few MB at soak rates;
 *   - the stored responses of embedded mode (KVTIER_RESPONSE_MEMORY_BYTES) and the
 *     reply memory (4 M tokens): not reported; the soak sizes the first so it fills
 *     within `minMs` at soak rates (a few KB per /v1/responses request), the second
 *     grows ~0.3 MB per 10 s window and is not full in a 10-minute run;
 *   - V8's heaps, glibc's arenas and the engine's KV pool pages touched by
 *     retained sequences: no figure; they settle within the first minute.
 * So the warm-up ends at the first window that is at least `minMs` in and
 * finds the hot cache full.
 */
export interface WarmupWindow {
  /** Milliseconds since the traffic started, at the end of this window. */
  atMs: number;
  hotBytes: number;
  hotBudgetBytes: number;
}

/** Index of the window that ends the warm-up, or null when the hot cache never filled after `minMs`. */
export function warmupEnd(windows: readonly WarmupWindow[], minMs: number): number | null {
  for (let i = 0; i < windows.length; i++) {
    const w = windows[i]!;
    if (w.atMs >= minMs && w.hotBytes >= 0.9 * w.hotBudgetBytes) return i;
  }
  return null;
}
