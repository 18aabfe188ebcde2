/**
 * The two file operations the fs store's hot path needs, written on the
 * callback fs API: one promise per call and no FileHandle objects (the
 * promise API allocates and tracks one per open, which measurably slows
 * MiB-sized reads on a busy box). Errors are the raw errno errors; the store
 * maps them to typed storage errors.
 */
import fs from 'node:fs';

import { StorageTooLargeError } from './errors.ts';

/**
 * open → fstat → read into a buffer of exactly the file's size → close.
 * ENOENT at open resolves null. The buffer has its own ArrayBuffer (not
 * Node's shared pool), so callers may view it as other typed arrays; with
 * `allocate` it is the caller's (a recycled buffer). A file past `maxBytes`
 * is refused from its size alone: a sparse file costs no disk and can claim
 * terabytes, which no buffer should be sized to. With `fill`, it reads the
 * file into the buffer instead of the fs reads here (GetOptions.fill).
 */
export function readWholeFile(
  path: string,
  allocate?: (size: number) => Uint8Array,
  maxBytes = Number.POSITIVE_INFINITY,
  fill?: (fd: number, bytes: Uint8Array) => Promise<void>,
): Promise<Uint8Array | null> {
  return new Promise((resolve, reject) => {
    fs.open(path, 'r', (openError, fd) => {
      if (openError) {
        if (openError.code === 'ENOENT') resolve(null);
        else reject(openError);
        return;
      }
      const finish = (error: unknown, bytes?: Uint8Array) => {
        fs.close(fd, (closeError) => {
          if (error ?? closeError) reject(error ?? closeError);
          else resolve(bytes!);
        });
      };
      fs.fstat(fd, (statError, stat) => {
        if (statError) return finish(statError);
        const size = stat.size;
        if (size > maxBytes) return finish(new StorageTooLargeError(`fs file ${path}`, size, maxBytes));
        let bytes: Uint8Array;
        try {
          bytes = allocate?.(size) ?? new Uint8Array(Buffer.allocUnsafeSlow(size).buffer, 0, size);
        } catch (allocateError) {
          // Thrown inside an fs callback it would be uncaught and end the process; here it fails this read only.
          return finish(allocateError);
        }
        if (bytes.byteLength !== size) return finish(new RangeError(`allocate(${size}) returned ${bytes.byteLength} bytes`));
        const buffer = bytes;
        if (size === 0) return finish(undefined, bytes);
        if (fill !== undefined) {
          let filling: Promise<void>;
          try {
            filling = fill(fd, buffer);
          } catch (fillError) {
            return finish(fillError); // thrown inside an fs callback it would end the process
          }
          filling.then(() => finish(undefined, bytes), finish);
          return;
        }
        let offset = 0;
        const readMore = () => {
          fs.read(fd, buffer, offset, size - offset, offset, (readError, bytesRead) => {
            if (readError) return finish(readError);
            offset += bytesRead;
            if (offset === size) return finish(undefined, bytes);
            if (bytesRead === 0) {
              // Blocks are immutable once renamed into place; a shrinking
              // file means someone outside the store truncated it.
              return finish(Object.assign(new Error(`short read: ${offset} of ${size} bytes; the file was modified outside the store`), { code: 'ESHORTREAD' }));
            }
            readMore();
          });
        };
        readMore();
      });
    });
  });
}

/**
 * Creates `path` exclusively (O_EXCL: never someone else's file), writes all
 * of `bytes`, optionally fdatasyncs, and closes. A failed write unlinks the
 * file; a close error counts (NFS-like mounts report deferred write errors
 * there).
 */
export function writeNewFile(path: string, bytes: Uint8Array, sync: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    fs.open(path, 'wx', 0o666, (openError, fd) => {
      if (openError) return reject(openError);
      const finish = (error: unknown) => {
        fs.close(fd, (closeError) => {
          const failure = error ?? closeError;
          if (!failure) return resolve();
          fs.unlink(path, (unlinkError) => {
            if (unlinkError && unlinkError.code !== 'ENOENT' && failure instanceof Error) {
              (failure as Error & { tempCleanupError?: unknown }).tempCleanupError = unlinkError;
            }
            reject(failure);
          });
        });
      };
      let offset = 0;
      const writeMore = () => {
        if (offset >= bytes.byteLength) {
          if (sync) fs.fdatasync(fd, finish);
          else finish(null);
          return;
        }
        fs.write(fd, bytes, offset, bytes.byteLength - offset, offset, (writeError, written) => {
          if (writeError) return finish(writeError);
          offset += written;
          writeMore();
        });
      };
      writeMore();
    });
  });
}
