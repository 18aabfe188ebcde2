/**
 * Runs `operation` and keeps its promise in `inFlight` until it settles, so an
 * adapter's close() can wait for every operation it let start.
 */
export function trackInFlight<T>(inFlight: Set<Promise<unknown>>, operation: () => Promise<T>): Promise<T> {
  let promise: Promise<T>;
  try {
    promise = operation();
  } catch (error) {
    return Promise.reject(error);
  }
  inFlight.add(promise);
  const forget = () => inFlight.delete(promise);
  promise.then(forget, forget);
  return promise;
}
