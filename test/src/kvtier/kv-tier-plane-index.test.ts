import { join } from 'node:path';

import { SegmentBlobStore } from '../../../storage-adapters/index.ts';
import { runKvTierSuite } from './kv-tier-suite.ts';
import { tempDir } from './fixtures.ts';

// The whole KvTier suite with the node index as the embedded plane's records (nodeIndex 'plane').
runKvTierSuite(
  'a segment store, node index on the plane',
  async () => {
    const dir = await tempDir('kvtier-plane-index-');
    return {
      open: () => SegmentBlobStore.open({ dir: join(dir.path, 'segments') }),
      dispose: () => dir.remove(),
    };
  },
  { nodeIndex: 'plane' },
);
