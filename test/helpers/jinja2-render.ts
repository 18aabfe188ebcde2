/**
 * Renders chat templates with Python jinja2 the way transformers'
 * apply_chat_template does (see jinja2-render.py), in one child process per
 * batch. The reference for inference-core/chat-template.ts.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'jinja2-render.py');
/** The first interpreter that has jinja2 (KVTIER_JINJA2_PYTHON overrides; /usr/bin/python3 need not have it where pyenv's does). */
let python: string | undefined;
function pythonWithJinja2(): string {
  if (python !== undefined) return python;
  const candidates = [process.env.KVTIER_JINJA2_PYTHON, '/usr/bin/python3', 'python3'].filter((c): c is string => !!c);
  for (const candidate of candidates) {
    if (spawnSync(candidate, ['-c', 'import jinja2'], { encoding: 'utf8' }).status === 0) return (python = candidate);
  }
  throw new Error(`no python3 with jinja2 among ${candidates.join(', ')}: pip install jinja2==3.1.6 or set KVTIER_JINJA2_PYTHON`);
}

export interface Jinja2Case {
  template: string;
  /** Exactly the keyword arguments transformers passes to render(): messages, tools, documents, add_generation_prompt, special tokens, extra kwargs. */
  context: Record<string, unknown>;
}

export type Jinja2Result = { text: string; error?: undefined } | { text?: undefined; error: string };

export function jinja2Render(cases: Jinja2Case[]): Jinja2Result[] {
  const r = spawnSync(pythonWithJinja2(), [SCRIPT], { input: JSON.stringify({ cases }), encoding: 'utf8', maxBuffer: 256 << 20, timeout: 120_000 });
  let out: { results?: Jinja2Result[] };
  try {
    out = JSON.parse(r.stdout) as { results?: Jinja2Result[] };
  } catch {
    throw new Error(`jinja2 reference failed (status ${r.status}): ${r.stderr || r.stdout}`);
  }
  if (!out.results || out.results.length !== cases.length) throw new Error(`jinja2 reference returned ${out.results?.length} results for ${cases.length} cases: ${r.stderr}`);
  return out.results;
}

/** The render context transformers builds: its kwargs, tools/documents as None when absent. */
export function transformersContext(options: {
  messages: unknown[];
  tools?: unknown[] | null;
  documents?: unknown[] | null;
  addGenerationPrompt?: boolean;
  specialTokens?: Record<string, unknown>;
  extra?: Record<string, unknown>;
}): Record<string, unknown> {
  return {
    ...options.specialTokens,
    ...options.extra,
    messages: options.messages,
    tools: options.tools ?? null,
    documents: options.documents ?? null,
    add_generation_prompt: options.addGenerationPrompt ?? false,
  };
}
