/**
 * `npm run bench -- failover`: kill -9 of a Redis Cluster primary (the one holding the job queue's
 * slot) while 4 clients run agent loops through 2 API processes and 2 workers, GC every second,
 * renewals flowing (test/src/cluster/failover-harness.ts, also run by failover-api.test.ts).
 *
 * Prints `requests_failed` (did not complete within 120 s of retries; the run throws instead),
 * `wrong_hits` (turns whose reply differs from the same turn before the kill), `live_blocks_lost`
 * (the live tenant's plane blocks lost, plus replayed turns that found less cached than before),
 * `failover_stall_ms` (the longest gap in served tokens over all clients from the kill until one
 * whole pass after the cluster is healthy), `p99_ttft_during_over_before` (p99 TTFT of the turns
 * during the failover, retries included, over the same turns' p99 before the kill), the promotion
 * time, retried requests and the most added latency of a retried request.
 */
import { runFailoverScenario } from '../test/src/cluster/failover-harness.ts';

export async function run(): Promise<Record<string, number | boolean>> {
  // KVTIER_BENCH_FAILOVER_RESTART=promotion: the killed node is restarted as soon as its replica is promoted.
  const restartAtPromotion = process.env.KVTIER_BENCH_FAILOVER_RESTART === 'promotion';
  return { restart_at_promotion: restartAtPromotion, ...(await runFailoverScenario((line) => console.error(`[failover] ${line}`), { restartAtPromotion })) };
}
