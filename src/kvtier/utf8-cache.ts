/**
 * UTF-8 bytes of the few strings a record repeats on every write (class,
 * tenant, writer), made once: the index and the plane encoded each of them
 * afresh per block, three small buffers a write on the #29 replay's hot path.
 * Bounded: past `maxEntries` distinct strings it starts over (tenants can be many).
 */
export class Utf8Cache {
  private readonly bytes = new Map<string, Buffer>();

  constructor(private readonly maxEntries = 1024) {}

  /** The UTF-8 bytes of `text`; shared, so callers copy out of it and never write into it. */
  of(text: string): Buffer {
    let bytes = this.bytes.get(text);
    if (bytes === undefined) {
      if (this.bytes.size >= this.maxEntries) this.bytes.clear();
      bytes = Buffer.from(text);
      this.bytes.set(text, bytes);
    }
    return bytes;
  }
}
