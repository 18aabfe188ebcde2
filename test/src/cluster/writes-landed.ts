/**
 * Waits for the workers' write-behind to land, as a cluster test's next request (maybe on another
 * worker) needs the blocks on the store: each worker's heartbeat (every KVTIER_HEARTBEAT_MS, 2 s by default; read through an
 * API process's GET /admin/stats) carries its tier's bytes queued or in flight. A heartbeat stored
 * after the call may still carry a snapshot taken just before it, so the wait takes each worker's
 * second heartbeat after the call, whose snapshot is newer, and needs it to show nothing queued.
 */
import { setTimeout as sleep } from 'node:timers/promises';

interface WorkersStats {
  tier: { workers: { workerId: string; at: number; cache: { writeBehind: { queuedBytes: number } } | null }[] };
}

export async function writesLanded(apiUrl: string, adminToken: string, workers: number, timeoutMs = 60_000): Promise<void> {
  const since = Date.now();
  const firstFresh = new Map<string, number>();
  const deadline = since + timeoutMs;
  while (Date.now() < deadline) {
    const response = await fetch(`${apiUrl}/admin/stats`, { headers: { authorization: `Bearer ${adminToken}` } });
    if (!response.ok) throw new Error(`/admin/stats: ${response.status} ${await response.text()}`);
    const { tier } = (await response.json()) as WorkersStats;
    let landed = 0;
    for (const w of tier.workers) {
      if (w.at <= since) continue;
      const first = firstFresh.get(w.workerId);
      if (first === undefined) firstFresh.set(w.workerId, w.at);
      else if (w.at > first && (w.cache?.writeBehind.queuedBytes ?? 0) === 0) landed++;
    }
    if (landed === workers) return;
    await sleep(50); // until the next heartbeat; the condition, not this pause, ends the wait
  }
  throw new Error(`the workers did not report their block writes landed within ${timeoutMs} ms`);
}
