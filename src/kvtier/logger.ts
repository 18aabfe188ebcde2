/** The subset of a pino/fastify logger kvtier uses: `(fields, message)`. */
export interface KvTierLogger {
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/** Default: one JSON line per warning on stderr; info is dropped. */
export const stderrLogger: KvTierLogger = {
  warn(fields, message) {
    process.stderr.write(`${JSON.stringify({ level: 'warn', component: 'kvtier', msg: message, ...fields })}\n`);
  },
  info() {},
};
