// Child of mmap-lifetime.test.ts (needs --expose-gc): opens a GGUF, closes it,
// opens it again (the kernel tends to hand back the same address), lets the
// first mapping's ArrayBuffer be collected, then reads the second mapping's
// tensor bytes. Prints the sum of the bytes; dies with SIGSEGV if the first
// buffer's finalizer unmapped the second mapping.
import { readGguf, type GgufFile } from '../../inference-core/gguf/index.ts';

const path = process.argv[2];
const rounds = Number(process.argv[3] ?? 20);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');

function openClose(): void {
  const g: GgufFile = readGguf(path);
  g.close();
}

let sum = 0;
for (let i = 0; i < rounds; i++) {
  openClose();
  const again = readGguf(path);
  for (let j = 0; j < 3; j++) gc();
  await new Promise((r) => setImmediate(r));
  gc();
  const bytes = again.tensor('w').data;
  for (let k = 0; k < bytes.length; k += 4096) sum += bytes[k];
  sum += bytes[bytes.length - 1];
  again.close();
}
process.stdout.write(JSON.stringify({ ok: true, sum }) + '\n');
