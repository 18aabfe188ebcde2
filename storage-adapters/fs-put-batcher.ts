/**
 * Batched block puts for the fs store: puts started in the same turn of the
 * event loop go to a `FsBatchWriter` together (one pool job per chunk: open,
 * write, close, rename for each file), instead of four libuv pool hops per
 * file. The writer is native (kvtier installs its addon's writeFilesAtomic,
 * src/kvtier/fs-batch-writer.ts); storage-adapters imports nothing of ours.
 * A file the writer could not write goes through the one-file path
 * (putAtomically), which owns the retry rules and the error mapping, so a
 * batched put fails or succeeds exactly as an unbatched one.
 */
import { putAtomically } from './fs-atomic-write.ts';
import { nextTempSuffix } from './fs-paths.ts';

/** Writes each `datas[i]` to `temps[i]` (O_EXCL) and renames it to `finals[i]`; one errno per file, 0 = done, never rejects for one file's failure. */
export type FsBatchWriter = (finals: string[], temps: string[], datas: Uint8Array[], fsync: boolean) => Promise<Int32Array>;

/** Files per writer call: two chunks can run on two pool threads at once. */
const CHUNK_FILES = 32;

interface PendingPut {
  path: string;
  bytes: Uint8Array;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class FsPutBatcher {
  private pending: PendingPut[] = [];
  private scheduled = false;

  constructor(
    private readonly writer: FsBatchWriter,
    private readonly fsync: boolean,
    private readonly shardDirs: Set<string>,
  ) {}

  put(path: string, bytes: Uint8Array): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ path, bytes, resolve, reject });
      if (this.pending.length >= CHUNK_FILES) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.flush();
        });
      }
    });
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    const temps = batch.map((put) => `${put.path}${nextTempSuffix()}`);
    let written: Promise<Int32Array>;
    try {
      written = this.writer(
        batch.map((put) => put.path),
        temps,
        batch.map((put) => put.bytes),
        this.fsync,
      );
    } catch (error) {
      written = Promise.reject(error);
    }
    written.then(
      (errnos) => batch.forEach((put, i) => (errnos[i] === 0 ? put.resolve() : this.putAlone(put))),
      () => batch.forEach((put) => this.putAlone(put)),
    );
  }

  private putAlone(put: PendingPut): void {
    putAtomically(put.path, put.bytes, this.fsync, this.shardDirs).then(put.resolve, put.reject);
  }
}
