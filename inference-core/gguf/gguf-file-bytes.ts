/**
 * A GGUF file's bytes in memory: a read-only mmap (native addon), or where the
 * addon is not built one buffer filled with positioned reads.
 */
import * as fs from 'node:fs';
import { NativeError, mmapFile } from '../../native/index.ts';
import { GgufError } from './gguf-errors.ts';

let warnedNoMmap = false;

/** Maps the file (or reads it, see loadFile); `mapped` says whether close() must unmap. */
export function openFile(path: string, useMmap: boolean): { bytes: Uint8Array; mapped: boolean } {
  try {
    fs.accessSync(path, fs.constants.R_OK);
  } catch (err) {
    throw new GgufError('KVT_ERR_GGUF_IO', path, 'file', `cannot open: ${(err as Error).message}; check the model path`);
  }
  if (useMmap) {
    try {
      return { bytes: new Uint8Array(mmapFile(path)), mapped: true };
    } catch (err) {
      const code = err instanceof NativeError ? err.code : '';
      if (code !== 'KVT_ERR_NATIVE_NOT_BUILT' && code !== 'KVT_ERR_NATIVE_STALE_BUILD') {
        throw new GgufError('KVT_ERR_GGUF_IO', path, 'file', `cannot map: ${(err as Error).message}`);
      }
      if (!warnedNoMmap) {
        warnedNoMmap = true;
        process.stderr.write(`kvtier: ${code}: reading GGUF files into memory instead of mapping them (${(err as Error).message})\n`);
      }
    }
  }
  return { bytes: loadFile(path), mapped: false };
}

/** Reads the whole file into one ArrayBuffer with positioned reads (no intermediate copies). */
function loadFile(path: string): Uint8Array {
  let fd: number;
  try {
    fd = fs.openSync(path, 'r');
  } catch (err) {
    throw new GgufError('KVT_ERR_GGUF_IO', path, 'file', `cannot open: ${(err as Error).message}; check the model path`);
  }
  try {
    const size = fs.fstatSync(fd).size;
    const bytes = new Uint8Array(new ArrayBuffer(size));
    const CHUNK = 1 << 30;
    let done = 0;
    while (done < size) {
      const n = fs.readSync(fd, bytes, done, Math.min(CHUNK, size - done), done);
      if (n === 0) throw new GgufError('KVT_ERR_GGUF_IO', path, 'file', `short read at byte ${done} of ${size}; the file changed while reading`);
      done += n;
    }
    return bytes;
  } finally {
    fs.closeSync(fd);
  }
}
