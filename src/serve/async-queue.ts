/** A push-based async iterable: the runner's callbacks in, `for await` out. */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiter: (() => void) | null = null;
  private ended = false;
  private error: unknown = null;
  private failed = false;

  push(item: T): void {
    this.items.push(item);
    this.wake();
  }
  end(): void {
    this.ended = true;
    this.wake();
  }
  fail(error: unknown): void {
    this.failed = true;
    this.error = error;
    this.wake();
  }
  private wake(): void {
    const waiter = this.waiter;
    this.waiter = null;
    waiter?.();
  }
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        yield this.items.shift()!;
        continue;
      }
      if (this.failed) throw this.error;
      if (this.ended) return;
      await new Promise<void>((resolve) => (this.waiter = resolve));
    }
  }
}
