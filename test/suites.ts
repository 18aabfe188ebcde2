/**
 * The two test sets, in one place (vitest.config.ts reads them):
 *   npm test          → the fast set: every test file not listed below — unit and
 *                       in-process tests, plus one real-service smoke per component
 *                       (SMOKES: Redis, S3, the dashboard in Chromium, llama.cpp
 *                       parity, a cluster of API + workers).
 *   npm run test:all  → both sets (what .ci/run runs).
 * A file is in exactly one set (test/docs/test-suites.test.ts checks it, and that
 * every path here names a test file): a new test file is fast unless added to SLOW.
 * Put a file in SLOW when it starts services beyond one smoke per component or
 * takes more than a few seconds on two quiet cores.
 */

/** The fast set's real-service smokes, one per component (they stay out of SLOW). */
export const SMOKES = [
  'test/src/stats/stats-store.test.ts', // Redis
  'test/storage-adapters/s3.test.ts', // S3 (Ceph RGW)
  'test/src/serve/dashboard.test.ts', // the dashboard in Chromium
  'test/inference-core/gemma3-parity.test.ts', // llama.cpp parity
  'test/src/cluster/dispatch.test.ts', // a cluster: API + workers on Redis
];

/** Test files that run only in `npm run test:all`. */
export const SLOW = [
  'test/inference-core/arch-parity.test.ts',
  'test/inference-core/chat-template-real.test.ts',
  'test/inference-core/deepseek-parity.test.ts',
  'test/inference-core/deepseek-quant-mix.test.ts',
  'test/inference-core/deepseek-real-vocab.test.ts',
  'test/inference-core/deepseek4-engine.test.ts',
  'test/inference-core/deepseek4-native.test.ts',
  'test/inference-core/deepseek4-parity.test.ts',
  'test/inference-core/deepseek4-quant-parity.test.ts',
  'test/inference-core/deepseek4-served-vocab.test.ts',
  'test/inference-core/deepseek4-synthetic.test.ts',
  'test/inference-core/engine-kquant.test.ts',
  'test/inference-core/engine-legacy-quant.test.ts',
  'test/inference-core/gemma3-real-vocab.test.ts',
  'test/inference-core/gguf-quant-types.test.ts',
  'test/inference-core/gguf-quantize-ggml.test.ts',
  'test/inference-core/gguf.test.ts',
  'test/inference-core/gptoss-parity.test.ts',
  'test/inference-core/gptoss-real-vocab.test.ts',
  'test/inference-core/gptoss-template.test.ts', // builds the 201,088-token harmony GGUF on first use
  'test/inference-core/lfm2-parity.test.ts',
  'test/inference-core/llamacpp-parity.test.ts',
  'test/inference-core/real-vocab-gguf.test.ts',
  'test/inference-core/speculative-constrained.test.ts',
  'test/inference-core/synthetic-llamacpp-quantize.test.ts',
  'test/inference-core/synthetic.test.ts',
  'test/inference-core/tokenizer-hf-import.test.ts',
  'test/inference-core/tokenizer-real-vocab-strip.test.ts',
  'test/inference-core/tokenizer-real-vocab.test.ts',
  'test/inference-core/tokenizer.test.ts',
  'test/native/matmul-kquant.test.ts',
  'test/native/matmul-legacy.test.ts',
  'test/native/quant-ggml.test.ts',
  'test/soak/soak.test.ts',
  'test/src/cli/admin-local.test.ts',
  'test/src/serve/deepseek4-api.test.ts', // 61 s
  'test/src/serve/deepseek4-mtp-serve.test.ts', // two servers generating deepseek4-tiny
  'test/src/cli/admin-server.test.ts', // 34 s at load 0.9 (cf344e6)
  'test/src/cli/admin-codec.test.ts', // 17 s
  'test/src/cli/model-inspect-gptoss.test.ts', // 10 s, two CLI runs on the harmony GGUF
  'test/src/kvtier/gc-renewal-race.test.ts', // starts a Redis Cluster
  'test/helpers/redis-cluster.test.ts', // starts a Redis Cluster
  'test/helpers/ceph-s3.test.ts', // starts a Ceph cluster twice
  'test/src/cluster/gc-leader.test.ts',
  'test/src/cluster/sharded-gc.test.ts', // starts a Redis Cluster and a runner process
  'test/src/cluster/purge-stats.test.ts',
  'test/src/cluster/purge-stats-cluster.test.ts',
  'test/src/cluster/failover-api.test.ts', // kill -9 of a Redis Cluster primary under API traffic
  'test/src/cluster/failover-worker.test.ts', // Redis Clusters: a worker's blocking reconnect during a failover
  'test/src/cluster/chains-cluster.test.ts', // a Redis Cluster, S3, 2 API processes + 2 workers
  'test/src/cluster/split.test.ts',
  'test/src/cluster/split-units.test.ts', // redis, 2 serve processes + prefill and decode workers on gemma3-tiny: 51 s at load 22
  'test/src/cluster/topology.test.ts',
  'test/deploy/compose-cluster.test.ts', // runs the compose file's 6 Redis Cluster nodes and its init job
  'test/src/kvtier/codecs/codec-quality.test.ts',
  'test/src/kvtier/kv-tier-s3.test.ts',
  'test/src/kvtier/metadata/cluster-retention-fs.test.ts',
  'test/src/kvtier/metadata/cluster-retention-s3.test.ts',
  'test/src/kvtier/metadata/redis-cluster-aof.test.ts',
  'test/src/kvtier/metadata/redis-cluster-failover.test.ts',
  'test/src/kvtier/metadata/redis-cluster-lost-shard.test.ts',
  'test/src/kvtier/metadata/redis-cluster-plane.test.ts',
  'test/src/kvtier/metadata/redis-legacy-keys.test.ts',
  'test/src/kvtier/metadata/redis-plane-slots.test.ts',
  'test/src/kvtier/metadata/redis-plane.test.ts',
  'test/src/kvtier/seal/block-sealer.test.ts',
  'test/src/recipe/chat-codec-real-templates.test.ts',
  'test/src/recipe/chat-prompt-real-templates.test.ts',
  'test/src/recipe/harmony-openai-template.test.ts', // clones llama.cpp's release bundle once, reads the harmony GGUF
  'test/src/recipe/harmony.test.ts', // loads the harmony GGUF's tokenizer
  'test/src/serve/admin-guard.test.ts',
  'test/src/serve/admin-login.test.ts',
  'test/src/serve/admin-redis.test.ts',
  'test/src/serve/api.test.ts',
  'test/src/serve/bad-input-shape.test.ts',
  'test/src/serve/codecs-api.test.ts',
  'test/src/serve/dashboard-blocks.test.ts',
  'test/src/serve/dashboard-burst.test.ts',
  'test/src/serve/faults.test.ts',
  'test/src/serve/real-vocab-e2e.test.ts',
  'test/src/serve/reasoning-api.test.ts',
  'test/src/serve/request-limits.test.ts',
  'test/src/serve/responses-features.test.ts',
  'test/src/serve/responses-redis.test.ts',
  'test/src/serve/structured-output.test.ts',
  'test/src/serve/units-archs-api.test.ts',
  'test/src/serve/gptoss-harmony-api.test.ts',
  'test/src/serve/units-admin.test.ts',
  'test/src/kvtier/tier-units-cluster.test.ts',
  'test/src/workers/bullmq-cancel.test.ts',
  'test/src/workers/bullmq.test.ts',
  'test/src/workers/bullmq-lost-job.test.ts',
  'test/src/workers/direct-handoff.test.ts',
  'test/src/workers/gc-schedule.test.ts',
  'test/src/workers/reply-outbox.test.ts',
  'test/src/replay/replay.test.ts',
  'test/src/replay/replay-redis-s3.test.ts',
  'test/src/replay/what-if.test.ts',
  'test/src/serve/dashboard-whatif.test.ts',
  'test/src/serve/dashboard-timeline.test.ts',
  'test/src/serve/body-too-large.test.ts',
];
