export { KvPool, PageAllocator, kvLayoutOf, TOKENS_PER_BLOCK, type KvLayout } from './kv-pool.ts';
