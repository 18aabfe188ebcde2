/**
 * Several nodes' handles on one Redis metadata plane (one fresh key prefix on a
 * test redis-server), as the nodes of a cluster share it:
 *
 *   const nodes = await openPlaneNodes(server.url, 2);   // nodes.planes[0], nodes.planes[1]
 *   …
 *   await nodes.close();
 */
import { RedisMetadataPlane } from '../../src/kvtier/metadata/index.ts';

let prefixes = 0;

export interface PlaneNodes {
  planes: RedisMetadataPlane[];
  keyPrefix: string;
  /** Closes every handle. */
  close(): Promise<void>;
}

export async function openPlaneNodes(url: string, count: number, label = 'nodes'): Promise<PlaneNodes> {
  const keyPrefix = `${label}${prefixes++}-${process.pid}:plane:`;
  const planes: RedisMetadataPlane[] = [];
  for (let i = 0; i < count; i++) planes.push(await RedisMetadataPlane.open({ url, keyPrefix }));
  return {
    planes,
    keyPrefix,
    close: async () => {
      for (const plane of planes) await plane.close();
    },
  };
}
