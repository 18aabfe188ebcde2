/**
 * Maps `items` through `fn` with at most `limit` calls in flight, keeping
 * input order in the result. Rejects with the first error, after every started
 * call has settled (so no work is still running against a store that the
 * caller may close next).
 */
export async function boundedMap<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let firstError: { error: unknown } | undefined;
  async function worker(): Promise<void> {
    while (firstError === undefined) {
      const index = next++;
      if (index >= items.length) return;
      try {
        results[index] = await fn(items[index], index);
      } catch (error) {
        firstError ??= { error };
      }
    }
  }
  const workers: Promise<void>[] = [];
  for (let w = 0; w < Math.min(Math.max(1, limit), items.length); w++) workers.push(worker());
  await Promise.all(workers);
  if (firstError !== undefined) throw firstError.error;
  return results;
}
