/**
 * The `kvtier` command.
 *
 *   kvtier serve  [--port 8080 --host 127.0.0.1 --model synthetic:small --data-dir ./data --storage fs:… --redis-url redis://…]
 *   kvtier worker [same flags; needs --redis-url / REDIS_URL] [--role both|prefill|decode]
 *   kvtier model inspect FILE.gguf [--json]
 *
 * Flags mirror the environment variables (PORT, KVTIER_MODEL, …); flags win.
 */
import { loadConfig } from '../config.ts';
import { describeError } from '../errors.ts';
import { buildApp } from '../serve/index.ts';
import { startBullmqWorker } from '../workers/index.ts';
import { ADMIN_USAGE, processIo, runAdminCommand } from './commands/index.ts';
import { MODEL_USAGE, runModelCommand, unrunnableModelLine } from './commands/model-command.ts';

const USAGE = `usage: kvtier <serve|worker> [--port N] [--host H] [--model synthetic:small|path.gguf] [--data-dir DIR]
                [--storage fs:DIR|s3://bucket/prefix?endpoint=URL] [--redis-url redis://…] [--api-keys FILE]
                [--admin-token T] [--threads N]   (flags mirror the env variables PORT, KVTIER_MODEL, …)
       serve:   [--dispatch aware|shared|roundrobin]   with --redis-url: to the worker holding the prefix, the shared queue, or each worker in turn
                [--split-min-prefill-tokens N]      with prefill and decode workers: split a request only for N+ uncached prompt tokens (0 = always)
       worker:  [--role both|prefill|decode]  whole jobs, or one half of a prefill/decode split`;

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE + '\n' + MODEL_USAGE + '\n' + ADMIN_USAGE + '\n');
    return;
  }
  if (command === 'serve') return serve(rest);
  if (command === 'worker') return worker(rest);
  if (command === 'model') {
    process.exitCode = runModelCommand(rest, processIo());
    return;
  }
  // The admin subcommands (and an unknown command's one-line error) are src/cli/commands'.
  process.exitCode = await runAdminCommand(argv, processIo());
}

/** An unrunnable --model file is one line and exit 2, before anything is loaded or bound. */
function refuseUnrunnableModel(model: string): boolean {
  const line = unrunnableModelLine(model);
  if (line === undefined) return false;
  process.stderr.write(line + '\n');
  process.exitCode = 2;
  return true;
}

async function serve(argv: string[]): Promise<void> {
  const config = loadConfig(process.env, argv);
  if (refuseUnrunnableModel(config.model)) return;
  const built = await buildApp(config);
  const address = await built.app.listen({ host: config.host, port: config.port });
  process.stderr.write(`kvtier serving ${built.context.modelId} on ${address} (${built.context.runner.kind} runner, storage ${config.storage})\n`);
  const stop = async () => {
    await built.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
}

async function worker(argv: string[]): Promise<void> {
  const config = loadConfig(process.env, argv);
  if (refuseUnrunnableModel(config.model)) return;
  const log = (level: string, message: string) => process.stderr.write(`[kvtier worker] ${level}: ${message}\n`);
  const running = await startBullmqWorker(config, log);
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
