/**
 * `target.push(...ids)` passes every id as a call argument: past ~100k ids
 * (a multi-megabyte prompt) that overflows the stack. Request-sized arrays
 * are appended with this loop instead.
 */
export function appendIds(target: number[], ids: ArrayLike<number>): void {
  for (let i = 0; i < ids.length; i++) target.push(ids[i]);
}
