/**
 * kvtier model inspect FILE [--json]: what a GGUF holds (architecture, dims,
 * quant mix, vocabulary, template, context, KV bytes per token and per block)
 * and whether kvtier can run it. Exit 0 when it can, 2 when it cannot (the
 * last line says why) or the file is not a readable GGUF.
 *
 * `unrunnableModelLine` is the same check `kvtier serve --model FILE` makes
 * before loading anything, so a file inspect calls unrunnable is refused by
 * serve with the same reason.
 */
import { inspectModelFile, type ModelReport } from '../../../inference-core/index.ts';
import { CliError } from './cli-error.ts';
import { json, table, type CliIo } from './output.ts';
import { formatBytes } from './units.ts';

export const MODEL_USAGE = `model:  kvtier model inspect FILE.gguf [--json]   architecture, dims, quant mix, vocab, template, KV bytes per token/block, and whether kvtier can run it`;

const int = (v: number | undefined) => (v === undefined ? '–' : v.toLocaleString('en-US'));

export function formatModelReport(r: ModelReport): string {
  const d = r.dims;
  const heads = d.heads === undefined ? '–' : `${d.heads} (kv ${int(d.kvHeads)}), head dim ${int(d.keyDim)}${d.valueDim !== d.keyDim ? ` / value ${int(d.valueDim)}` : ''}`;
  const rope = [r.rope.freqBase === undefined ? undefined : `base ${r.rope.freqBase}`, r.rope.scaling ? `scaling ${r.rope.scaling}` : undefined, r.rope.freqFactors ? 'frequency factors (rope_freqs)' : undefined]
    .filter(Boolean)
    .join(', ');
  const lines = [
    `file            ${r.path} (${formatBytes(r.fileBytes)})`,
    `architecture    ${r.architecture}${r.name ? ` — ${r.name}` : ''}`,
    `layers          ${int(d.layers)} · model dim ${int(d.dModel)} · ffn ${int(d.ffnDim)}`,
    `heads           ${heads}`,
    `rope            ${rope || '–'}${r.slidingWindow ? ` · sliding window ${int(r.slidingWindow)}` : ''}`,
    `context         ${int(r.contextLength)} tokens`,
    `parameters      ${int(r.params)} · ${r.bitsPerWeight.toFixed(2)} bits per weight`,
    `vocabulary      ${r.vocab.model ?? '–'}${r.vocab.pre ? ` (pre-tokenizer ${r.vocab.pre})` : ''} · ${int(r.vocab.size)} tokens`,
    `chat template   ${r.chatTemplate.present ? `${int(r.chatTemplate.chars)} characters${r.chatTemplate.harmony ? ' · harmony (analysis → reasoning_content, final → content, to=functions.* → tool_calls)' : ''}` : 'none (kvtier falls back to ChatML)'}`,
    `kv cache (f16)  ${r.kvBytesPerToken === undefined ? '–' : `${formatBytes(r.kvBytesPerToken)} per token · ${formatBytes(r.kvBytesPerBlock ?? 0)} per 64-token block`}`,
    ...(r.mla
      ? [`                MLA latent (kv_lora_rank ${int(r.mla.kvLoraRank)} + rope ${int(r.mla.ropeDim)} per layer); per-head K and V would take ${formatBytes(r.mla.expandedBytesPerToken)} per token · ${formatBytes(r.mla.expandedBytesPerBlock)} per block`]
      : []),
    ...(r.dsv4
      ? [
          `state (f32)     deepseek4: ${formatBytes(r.dsv4.perTokenInWindow)} per token inside the ${int(r.dsv4.swaWindow)}-token SWA window · ${formatBytes(r.dsv4.perPosition)} per context position (compressed entries + indexer keys; ratios ${r.dsv4.compressRatios.join('/')}) · ${formatBytes(r.dsv4.stateBytes4k)} at 4k · ${formatBytes(r.dsv4.stateBytes32k)} at 32k`,
          `units           tail ≤ ${formatBytes(r.dsv4.unitTailBytes)} per unit (f32: SWA windows, unfinished CSA/HCA groups, the partial block's entries) next to the whole state ${formatBytes(r.dsv4.stateBytes4k)} at 4k · ${formatBytes(r.dsv4.stateBytes32k)} at 32k; entry blocks of ${formatBytes(r.dsv4.unitBlockBytes)} per 64 tokens, shared by the units on a prefix`,
        ]
      : []),
    ...(r.state
      ? [`state at p      ${r.state.blockConcatenable ? 'block-concatenable' : `not block-concatenable: ${r.state.detail}${r.state.unitTailBytes ? ` · unit tail ≤ ${formatBytes(r.state.unitTailBytes)}` : ''}`} · block tier ${r.state.tier}`]
      : []),
  ];
  const mix = table(
    ['type', 'tensors', 'parameters', 'bytes'],
    r.quantMix.map((m) => [m.type, int(m.tensors), int(m.params), formatBytes(m.bytes)]),
  );
  const verdict = r.runnable.ok ? 'kvtier can run it: yes' : `kvtier can run it: no — ${r.runnable.reason}`;
  return lines.join('\n') + '\n\n' + mix + '\n' + verdict + '\n';
}

/** `kvtier model …`; returns the exit code. */
export function runModelCommand(argv: readonly string[], io: CliIo): number {
  const [sub, ...rest] = argv;
  try {
    if (sub === undefined || sub === '--help' || sub === '-h') {
      io.out(MODEL_USAGE + '\n');
      return 0;
    }
    if (sub !== 'inspect') throw new CliError('KVT_ERR_CLI_UNKNOWN_COMMAND', `kvtier model: unknown subcommand "${sub}"; use inspect`);
    let asJson = false;
    const files: string[] = [];
    for (const arg of rest) {
      if (arg === '--json') asJson = true;
      else if (arg === '--help' || arg === '-h') {
        io.out(MODEL_USAGE + '\n');
        return 0;
      } else if (arg.startsWith('-')) throw new CliError('KVT_ERR_CLI_UNKNOWN_FLAG', `kvtier model inspect: unknown flag ${arg}; it takes FILE and --json`);
      else files.push(arg);
    }
    if (files.length !== 1) throw new CliError('KVT_ERR_CLI_USAGE', 'kvtier model inspect: give exactly one GGUF file');
    let report: ModelReport;
    try {
      report = inspectModelFile(files[0]);
    } catch (error) {
      throw new CliError('KVT_ERR_CLI_BAD_VALUE', `kvtier model inspect: ${firstLine(error)}`);
    }
    io.out(asJson ? json(report) : formatModelReport(report));
    return report.runnable.ok ? 0 : 2;
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    io.err((error.message.startsWith('kvtier') ? error.message : `kvtier: ${error.message}`) + '\n');
    return error.exitCode;
  }
}

/**
 * For `serve`/`worker --model FILE`: undefined when kvtier can run the file
 * (or it is a synthetic spec), else the one line to print before exiting 2.
 */
export function unrunnableModelLine(model: string): string | undefined {
  if (model.startsWith('synthetic:')) return undefined;
  let report: ModelReport;
  try {
    report = inspectModelFile(model);
  } catch (error) {
    return `kvtier: cannot use --model ${model}: ${firstLine(error)}`;
  }
  return report.runnable.ok ? undefined : `kvtier: cannot run ${model}: ${report.runnable.reason}`;
}

function firstLine(error: unknown): string {
  return ((error as Error)?.message ?? String(error)).split('\n')[0];
}
