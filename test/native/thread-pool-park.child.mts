// Child of thread-pool-park.test.ts: 40 rounds of a parallel kernel then 10 ms idle, the pool parked
// after each round (argv[2] === 'park') or not (argv[2] === 'spin'); reports the CPU time of the loop.
import { createBackend, parkThreads } from '../../native/index.ts';

const backend = createBackend('cpu');
const n = 1 << 18;
const a = backend.alloc(n);
const b = backend.alloc(n);
const out = backend.alloc(n);
backend.write(a, new Float32Array(n).fill(1));
backend.write(b, new Float32Array(n).fill(2));
const park = process.argv[2] === 'park';
backend.add(out, a, b, n);
const before = process.cpuUsage();
for (let round = 0; round < 40; round++) {
  backend.add(out, a, b, n); // a kernel split over the pool: its worker has just run when this returns
  if (park) parkThreads();
  await new Promise((resolve) => setTimeout(resolve, 10));
}
const used = process.cpuUsage(before);
process.stdout.write(JSON.stringify({ threads: backend.info().threads, cpuMs: (used.user + used.system) / 1000 }));
