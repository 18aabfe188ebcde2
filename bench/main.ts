export {};
/**
 * `npm run bench -- <area> [<area> …]`: runs each area's benchmark and prints one
 * JSON object on stdout (progress on stderr). An area may be made of several
 * modules; their fields are merged.
 */
const areas: Record<string, string[]> = {
  storage: ['./storage.ts', './storage-kvtier.ts', './storage-codecs.ts', './storage-seal.ts'],
  engine: ['./engine.ts', './engine-deepseek.ts'],
  'engine-deepseek': ['./engine-deepseek.ts'],
  'engine-deepseek4': ['./engine-deepseek4.ts'],
  'model-files': ['./model-files.ts'],
  'native-kernels': ['./native-kernels.ts'],
  e2e: ['./e2e.ts'],
  cluster: ['./cluster.ts'],
  prompt: ['./prompt.ts'],
  features: ['./features.ts'],
  speculative: ['./speculative.ts'],
  'metadata-plane': ['./metadata-plane.ts'],
  'retention-sim': ['./retention-sim.ts'],
  failover: ['./failover.ts'],
  replay: ['./replay.ts'],
  'replay-floor': ['./replay-floor.ts'],
  units: ['./units.ts', './units-load.ts', './units-deepseek4.ts'],
  'units-load': ['./units-load.ts'],
  'units-deepseek4': ['./units-deepseek4.ts'],
};

type BenchModule = { run: () => Promise<Record<string, number | string | boolean>> };

const requested = process.argv.slice(2).filter((a) => a !== '--');
if (requested.length === 0 || requested.some((a) => !(a in areas))) {
  console.error(`usage: npm run bench -- <${Object.keys(areas).join('|')}> …`);
  process.exit(2);
}

const result: Record<string, number | string | boolean> = {
  date: new Date().toISOString(),
  node: process.version,
  cpus: (await import('node:os')).cpus().length,
};
for (const area of requested) {
  for (const modulePath of areas[area]) {
    console.error(`[bench] ${area}: ${modulePath}`);
    const mod = (await import(modulePath)) as BenchModule;
    Object.assign(result, await mod.run());
  }
}
process.stdout.write(JSON.stringify(result, null, 2) + '\n');
process.exit(0);
