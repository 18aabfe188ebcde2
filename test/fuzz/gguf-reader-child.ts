/**
 * Reads each GGUF file named on the command line with the native mmap path
 * and the read-into-memory path, one JSON line per file and path: "ok" or the
 * typed error's code. Any other throw is printed as "untyped" and a native
 * crash kills this process, which the parent test sees as a failure.
 */
import { statSync } from 'node:fs';

import { GgufError, readGguf } from '../../inference-core/gguf/index.ts';

for (const file of process.argv.slice(2)) {
  for (const mmap of [true, false]) {
    process.stdout.write(JSON.stringify({ file, mmap, start: true }) + '\n');
    let outcome: string;
    try {
      const gguf = readGguf(file, { mmap, rejectUnsupportedTypes: false });
      const size = statSync(file).size;
      // Every tensor view lies inside the file.
      for (const t of gguf.tensors.values()) {
        if (t.fileOffset < 0 || t.fileOffset + t.byteLength > size || t.data.byteLength !== t.byteLength) throw new Error(`tensor view [${t.fileOffset}, +${t.byteLength}) outside a ${size}-byte file`);
        // Touch the first and last byte of the view: a view past the mapping would fault here.
        if (t.data.byteLength > 0) void (t.data[0]! + t.data[t.data.byteLength - 1]!);
      }
      gguf.close();
      outcome = 'ok';
    } catch (error) {
      outcome = error instanceof GgufError ? error.code : `untyped ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
    }
    process.stdout.write(JSON.stringify({ file, mmap, outcome }) + '\n');
  }
}
