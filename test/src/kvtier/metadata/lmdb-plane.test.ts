import { join } from 'node:path';

import { LmdbMetadataPlane, type MetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { tempDir } from '../fixtures.ts';
import { runPlaneConformance } from './plane-conformance.ts';

runPlaneConformance('lmdb', async () => {
  const dir = await tempDir('kvtier-plane-');
  const opened: MetadataPlane[] = [];
  return {
    open: async () => {
      // One environment per process: a second "node" in this process shares the first handle's env through a second open.
      const plane = await LmdbMetadataPlane.open({ path: join(dir.path, 'plane') });
      opened.push(plane);
      return plane;
    },
    dispose: async () => {
      for (const plane of opened) await plane.close();
      await dir.remove();
    },
  };
});
