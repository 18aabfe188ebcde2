/**
 * The special-token part of importing a tokenizer.json (hf-tokenizer-import.ts):
 * which ids are bos/eos/eot/pad/…, whether bos/eos/sep are added, and whether a
 * SentencePiece vocabulary adds a space prefix, decided as gguf-py's
 * SpecialVocab and convert_hf_to_gguf.py decide them.
 */
import type { HfAddedToken, HfModelConfig } from './hf-tokenizer-import.ts';

type Json = Record<string, unknown>;

function tokenContent(entry: unknown): string | undefined {
  if (typeof entry === 'string') return entry;
  if (typeof entry === 'object' && entry !== null && typeof (entry as Json).content === 'string') return (entry as Json).content as string;
  return undefined;
}

/** SentencePiece's add_dummy_prefix as tokenizer.json expresses it: a Prepend('▁') normalizer or a prepending Metaspace. */
export function addsSpacePrefix(tj: Json): boolean {
  const walk = (n: unknown, list: string): boolean => {
    if (typeof n !== 'object' || n === null) return false;
    const o = n as Json;
    if (Array.isArray(o[list])) return (o[list] as unknown[]).some((x) => walk(x, list));
    if (o.type === 'Prepend' && o.prepend === '\u2581') return true;
    if (o.type === 'Metaspace') return o.prepend_scheme !== undefined ? o.prepend_scheme !== 'never' : o.add_prefix_space !== false;
    return false;
  };
  return walk(tj.normalizer, 'normalizers') || walk(tj.pre_tokenizer, 'pretokenizers');
}

export function specialVocab(tj: Json, tcIn: Json, added: HfAddedToken[], config: HfModelConfig, vocabSize: number) {
  const tc: Json = { ...tcIn };
  const types = ['bos', 'eos', 'unk', 'sep', 'pad', 'cls', 'mask'];
  const add = new Map<string, boolean>();
  const hasConfig = Object.keys(tcIn).length > 0;
  let bos = tokenContent(tc.bos_token);
  let eos = tokenContent(tc.eos_token);
  const cls = tokenContent(tc.cls_token);
  if (!bos && cls) tc.bos_token = bos = cls;
  const post = tj.post_processor as Json | undefined;
  if (post && typeof post === 'object') {
    const procs = (Array.isArray(post.processors) ? post.processors : [post]) as Json[];
    for (const p of procs) {
      if (p.type !== 'TemplateProcessing' || !Array.isArray(p.single) || p.single.length < 2) continue;
      const single = p.single as Array<{ SpecialToken?: { id?: string } }>;
      const first = single[0].SpecialToken?.id;
      if (first) {
        if (!hasConfig) bos = first;
        add.set('bos', first === bos || first === cls);
      }
      const last = single[single.length - 1].SpecialToken?.id;
      if (last) {
        if (!hasConfig) eos = last;
        else if (last !== eos) {
          types.push('eot');
          tc.eot_token = eos;
          tc.eos_token = eos = last;
        }
        add.set('eos', last === eos);
      }
    }
  }
  if (!hasConfig) {
    if (bos) tc.bos_token = bos;
    if (eos) tc.eos_token = eos;
  }
  const ids = new Map<string, number>();
  for (const typ of types) {
    const a = tc[`add_${typ}_token`];
    if (typeof a === 'boolean') add.set(typ, a);
    const content = tokenContent(tc[`${typ}_token`]);
    if (content === undefined) continue;
    const id = added.find((t) => t.content === content)?.id;
    if (id !== undefined && id < vocabSize) ids.set(typ, id);
  }
  for (const typ of ['bos', 'eos', 'pad'] as const) {
    if (ids.has(typ)) continue;
    let id = config[`${typ}_token_id`];
    if (Array.isArray(id)) id = id[0];
    if (typeof id === 'number' && id >= 0 && id < vocabSize) ids.set(typ, id);
  }
  ids.delete('cls');
  ids.delete('mask');
  for (const k of [...add.keys()]) if (!['bos', 'eos', 'sep'].includes(k)) add.delete(k);
  return { ids, add };
}

