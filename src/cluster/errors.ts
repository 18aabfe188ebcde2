import { KvtError } from '../errors.ts';

/** Cluster coordination errors: KVT_ERR_CLUSTER_<WHAT>. */
export class ClusterError extends KvtError {
  constructor(what: 'BAD_OPTION' | 'LOCK_LOST' | 'GC_BUSY' | 'REDIS', message: string, options: { param?: string; cause?: unknown } = {}) {
    super(`KVT_ERR_CLUSTER_${what}`, message, options);
    this.name = 'ClusterError';
  }
}
