/**
 * The `kvtier` command.
 *
 *   kvtier serve  [--port 8080 --host 127.0.0.1 --model synthetic:small --data-dir ./data --storage fs:… --redis-url redis://…]
 *   kvtier worker [same flags; needs --redis-url / REDIS_URL] [--role both|prefill|decode]
 *   kvtier model inspect FILE.gguf [--json]
 *   kvtier replay TRACE.jsonl[.gz] [--ttl 1h] [--json]   (src/replay)
 *
 * Flags mirror the environment variables (PORT, KVTIER_MODEL, …); flags win.
 */
import { describeError } from '../errors.ts';

// Each command imports what it needs when it runs: an admin command such as
// `kvtier policy show` must not load the server, the engine and BullMQ first.
const admin = () => import('./commands/index.ts');
const model = () => import('./commands/model-command.ts');

const USAGE = `usage: kvtier <serve|worker> [--port N] [--host H] [--model synthetic:small|path.gguf] [--data-dir DIR]
                [--storage fs:DIR|s3://bucket/prefix?endpoint=URL] [--redis-url redis://…] [--api-keys FILE]
                [--admin-token T] [--threads N]   (flags mirror the env variables PORT, KVTIER_MODEL, …)
       serve:   [--dispatch aware|shared|roundrobin]   with --redis-url: to the worker holding the prefix, the shared queue, or each worker in turn
                [--split-min-prefill-tokens N]      with prefill and decode workers: split a request only for N+ uncached prompt tokens (0 = always)
       worker:  [--role both|prefill|decode]  whole jobs, or one half of a prefill/decode split
       both:    [--handoff direct|queue]   with --redis-url: shared-queue jobs handed to an idle worker directly, or always through BullMQ`;

const REPLAY_USAGE = `replay: kvtier replay TRACE.jsonl[.gz] [--ttl 5m|1h|none] [--speed 0|1|N] [--limit N] [--json]   a trace through the cache (kvtier replay --help)`;

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    const [{ ADMIN_USAGE }, { MODEL_USAGE }] = await Promise.all([admin(), model()]);
    process.stdout.write(USAGE + '\n' + MODEL_USAGE + '\n' + ADMIN_USAGE + '\n' + REPLAY_USAGE + '\n');
    return;
  }
  if (command === 'serve') return serve(rest);
  if (command === 'worker') return worker(rest);
  if (command === 'replay') {
    const [{ runReplayCommand }, { processIo }] = await Promise.all([import('./commands/replay-command.ts'), admin()]);
    process.exitCode = await runReplayCommand(rest, processIo());
    return;
  }
  if (command === 'model') {
    const [{ runModelCommand }, { processIo }] = await Promise.all([model(), admin()]);
    process.exitCode = runModelCommand(rest, processIo());
    return;
  }
  // The admin subcommands (and an unknown command's one-line error) are src/cli/commands'.
  const { processIo, runAdminCommand } = await admin();
  process.exitCode = await runAdminCommand(argv, processIo());
}

/** An unrunnable --model file is one line and exit 2, before anything is loaded or bound. */
async function refuseUnrunnableModel(modelPath: string): Promise<boolean> {
  const line = (await model()).unrunnableModelLine(modelPath);
  if (line === undefined) return false;
  process.stderr.write(line + '\n');
  process.exitCode = 2;
  return true;
}

async function serve(argv: string[]): Promise<void> {
  const { loadConfig } = await import('../config.ts');
  const config = loadConfig(process.env, argv);
  if (await refuseUnrunnableModel(config.model)) return;
  const { buildApp } = await import('../serve/index.ts');
  const built = await buildApp(config);
  const address = await built.app.listen({ host: config.host, port: config.port });
  process.stderr.write(`kvtier serving ${built.context.modelId} on ${address} (${built.context.runner.kind} runner, storage ${config.storage})\n${built.adminLogin.banner(address)}\n`);
  const stop = async () => {
    await built.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

async function worker(argv: string[]): Promise<void> {
  const { loadConfig } = await import('../config.ts');
  const config = loadConfig(process.env, argv);
  if (await refuseUnrunnableModel(config.model)) return;
  const { startBullmqWorker } = await import('../workers/index.ts');
  const { promptCodecFromGgufFile, sharedReplyRecords } = await import('../recipe/index.ts');
  const { resolveModelPath } = await import('../../inference-core/index.ts');
  const log = (level: string, message: string) => process.stderr.write(`[kvtier worker] ${level}: ${message}\n`);
  // The reply memory's records are written here, ahead of each job's `done` (bullmq-worker.ts), with the API's own codec.
  const codec = promptCodecFromGgufFile(resolveModelPath(config.model, { dataDir: config.dataDir }));
  const running = await startBullmqWorker(config, log, { replyRecords: (job, ids) => sharedReplyRecords(codec, job, ids) });
  process.stderr.write(`kvtier worker ${running.id} ready\n`);
  const stop = async () => {
    await running.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const described = describeError(error);
  process.stderr.write(`kvtier: ${described.code}: ${described.message}\n  hint: ${described.hint}\n`);
  process.exit(1);
});
