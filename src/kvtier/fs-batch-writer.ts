/**
 * The fs store's batched puts (storage-adapters/fs-put-batcher.ts) over the
 * native addon's writeFilesAtomic: the blocks whose puts start in one
 * event-loop turn are written by one pool job, not four pool hops each (on a
 * loaded 2-core box the hops cost more than the syscalls; bench/RESULTS.md
 * "replay (#29), batched file writes"). Off by default: on the ext4 disk
 * here the one job per batch lost to node:fs's pool threads writing in
 * parallel. Without the addon (not built, or an older build) the store keeps
 * its one-file path: same files, same errors.
 */
import { FsBlobStore, type BlobStore } from '../../storage-adapters/index.ts';
import { loadAddon } from '../../native/index.ts';

/** Installs the native batch writer on `store` when it is an fs store and the addon has one; returns whether it did. */
export function useNativeFsBatches(store: BlobStore, enabled = true): boolean {
  if (!(store instanceof FsBlobStore)) return false;
  if (!enabled) {
    store.useBatchWriter(null);
    return false;
  }
  try {
    const addon = loadAddon();
    if (typeof addon.writeFilesAtomic !== 'function') return false;
    store.useBatchWriter(addon.writeFilesAtomic.bind(addon));
    return true;
  } catch {
    // Not built: the one-file path writes the same files.
    return false;
  }
}
