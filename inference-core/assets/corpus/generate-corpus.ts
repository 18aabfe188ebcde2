/**
 * Writes generated.txt: deterministic, varied English built from small
 * hand-written grammars (questions and answers, instructions, reports with
 * numbers and dates, lists, tool-call-like JSON). It widens the corpus the
 * synthetic tokenizers are trained on beyond the hand-written files beside
 * it. Run once with `npx tsx inference-core/assets/corpus/generate-corpus.ts`;
 * the output is committed, so the vocabulary never depends on this script
 * changing silently.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

let state = 0x2545f491;
function rand(): number {
  // xorshift32: tiny, deterministic, good enough for picking words.
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return (state >>> 0) / 4294967296;
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

const people = ['Maria', 'Tom', 'Aisha', 'Kenji', 'Olga', 'Lucas', 'Priya', 'Samuel', 'Chen', 'Fatima', 'Noah', 'Elena', 'the engineer', 'my neighbour', 'the teacher', 'our manager', 'the doctor', 'a farmer', 'the pilot', 'the old captain'];
const nouns = ['report', 'garden', 'bicycle', 'server', 'kitchen', 'letter', 'river', 'database', 'meeting', 'library', 'train', 'recipe', 'bridge', 'camera', 'market', 'question', 'window', 'cache', 'mountain', 'song', 'network', 'painting', 'budget', 'forest', 'request', 'holiday', 'contract', 'school', 'storm', 'program'];
const adjectives = ['quiet', 'busy', 'old', 'new', 'broken', 'careful', 'bright', 'slow', 'fast', 'small', 'large', 'strange', 'simple', 'expensive', 'cheap', 'warm', 'cold', 'useful', 'noisy', 'empty', 'famous', 'hidden', 'local', 'remote'];
const verbs = ['fixed', 'painted', 'visited', 'opened', 'measured', 'cleaned', 'described', 'tested', 'rebuilt', 'finished', 'cancelled', 'moved', 'explained', 'copied', 'checked', 'ignored', 'found', 'lost', 'sold', 'designed'];
const places = ['in the city', 'near the harbour', 'at the station', 'behind the school', 'on the third floor', 'in the north wing', 'by the river', 'at home', 'in the data centre', 'on the island', 'across the valley', 'under the old bridge'];
const times = ['yesterday', 'last week', 'this morning', 'on Monday', 'in March', 'after lunch', 'before the storm', 'every Friday', 'in 2019', 'at midnight', 'two years ago', 'tomorrow'];
const reasons = ['because it was raining', 'so that everyone could see it', 'although nobody had asked', 'since the old one had failed', 'to save money', 'for the first time', 'without telling anyone', 'as the manual suggested', 'while the others waited', 'even though it was late'];
const topics = ['caching', 'gardening', 'baking bread', 'learning Spanish', 'running a marathon', 'writing tests', 'repairing bicycles', 'saving energy', 'reading maps', 'planning a trip', 'sorting numbers', 'hashing strings', 'storing files', 'measuring latency', 'brewing coffee', 'keeping bees'];
const units = ['metres', 'kilograms', 'seconds', 'milliseconds', 'euros', 'dollars', 'litres', 'percent', 'tokens', 'bytes', 'requests', 'kilometres'];
const tools = ['get_weather', 'search_docs', 'read_file', 'run_query', 'send_email', 'create_ticket', 'list_files', 'get_time'];

function sentence(): string {
  switch (int(0, 5)) {
    case 0: return `${cap(pick(people))} ${pick(verbs)} the ${pick(adjectives)} ${pick(nouns)} ${pick(places)} ${pick(times)}.`;
    case 1: return `${cap(pick(times))}, ${pick(people)} ${pick(verbs)} the ${pick(nouns)} ${pick(reasons)}.`;
    case 2: return `The ${pick(nouns)} was ${pick(adjectives)}, and the ${pick(nouns)} was ${pick(adjectives)} too.`;
    case 3: return `It took ${int(2, 950)} ${pick(units)} to finish the ${pick(nouns)}, which was ${int(3, 99)}% more than we expected.`;
    case 4: return `Why did ${pick(people)} say the ${pick(nouns)} wasn't ${pick(adjectives)}? Nobody knows, but it's likely they'd seen it ${pick(places)}.`;
    default: return `If you want a ${pick(adjectives)} ${pick(nouns)}, you'll need patience, a ${pick(adjectives)} ${pick(nouns)} and about ${int(1, 12)} hours.`;
  }
}

function paragraph(): string {
  const n = int(3, 7);
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(sentence());
  return out.join(' ');
}

function dialogue(): string {
  const topic = pick(topics);
  const lines = [
    `User: Can you explain ${topic} in simple terms?`,
    `Assistant: Sure. ${cap(topic)} is mostly about doing small steps carefully. ${sentence()} ${sentence()}`,
    `User: What is the most common mistake?`,
    `Assistant: The most common mistake is rushing. ${sentence()} In short: start small, measure, and repeat.`,
  ];
  return lines.join('\n');
}

function toolExchange(): string {
  const tool = pick(tools);
  const city = pick(['Paris', 'Tokyo', 'Lagos', 'Lima', 'Oslo', 'Cairo', 'Delhi', 'Austin']);
  const args = JSON.stringify({ query: `${pick(adjectives)} ${pick(nouns)}`, city, limit: int(1, 20) });
  const result = JSON.stringify({ ok: true, items: int(0, 40), took_ms: int(1, 900), note: sentence() });
  return [
    `User: Please use ${tool} to look up the ${pick(nouns)} in ${city}.`,
    `Assistant: {"name": "${tool}", "arguments": ${args}}`,
    `Tool: ${result}`,
    `Assistant: I found the answer. ${sentence()}`,
  ].join('\n');
}

function list(): string {
  const n = int(3, 6);
  const out = [`Steps for ${pick(topics)}:`];
  for (let i = 1; i <= n; i++) out.push(`${i}. ${cap(pick(verbs).replace(/ed$/, ''))} the ${pick(adjectives)} ${pick(nouns)}.`);
  return out.join('\n');
}

function report(): string {
  const y = int(1990, 2030);
  const m = String(int(1, 12)).padStart(2, '0');
  const d = String(int(1, 28)).padStart(2, '0');
  return `Report ${y}-${m}-${d}: ${int(10, 99999)} ${pick(units)} processed, ${int(0, 500)} errors, p99 latency ${int(1, 400)}.${int(0, 9)} ms, cost $${int(1, 9999)}.${String(int(0, 99)).padStart(2, '0')}.`;
}

const lexicon = (
  'account action address agent alarm album angle animal answer apple area argument arrow article artist ' +
  'audio author autumn avenue balance ball band bank barrel basket battery beach bean bear bell bench berry ' +
  'bird blade blanket block board boat body bone book border bottle bottom branch bread brick brush bucket ' +
  'buffer builder button cabin cable cake camera campus candle canvas capital captain carbon card carpet cart ' +
  'castle cattle ceiling cell center chain chair chalk channel chapter charge chart cheese cherry chicken ' +
  'circle city claim class client clock cloud coach coast coffee collar colour column comment company compass ' +
  'config copper corner cotton counter county course cousin cover cradle credit crew crowd crystal culture ' +
  'cursor curtain cushion customer cycle dance danger daughter deadline decimal degree delay delta desert ' +
  'device diamond diary digest dinner doctor domain dragon drawer dream driver engine entry envelope error ' +
  'event export fabric factor family farmer feather feature fence field figure filter finger flag flame ' +
  'flower folder forest format fossil frame friend fruit galaxy garage garden gate glass glove grain graph ' +
  'grass handle harbor header health heart helmet hammer history honey horizon hotel house index island ' +
  'jacket jungle kernel kettle key kingdom kitchen ladder lake lamp language layer leader lemon lesson letter ' +
  'level library limit line lion listener lobby locker logger machine magnet manager marble market matrix ' +
  'meadow member memory message metal method mirror module moment monitor mountain mouse museum needle ' +
  'number ocean office option orange orbit order owner packet paddle palace panel paper parser pattern ' +
  'pencil pepper person picture pillow pilot planet player pocket poem pointer policy portal potato powder ' +
  'printer prism profile project queue rabbit record region report rhythm ribbon river rocket router ' +
  'saddle sample scale scanner schema season sensor session shadow shelf signal silver sketch socket ' +
  'soldier source spider spring square stable station stream street string student summer sunset ' +
  'surface switch symbol system table target teacher template tenant thread ticket tiger timer token ' +
  'tower tractor trader trail tunnel update user valley vector velvet village violin volume wagon ' +
  'wallet water window winter wizard worker yard zebra'
).split(' ');
const verbsLex = 'get set make build load save find parse read write send fetch create delete update check compute render handle open close start stop reset merge split sort count scan resolve encode decode apply'.split(' ');

const suffixes = ['', '', 's', 'er', 'ing', 'ed', 'less', 'ness', 'ful', 'ish'];
function identifier(): string {
  const a = pick(lexicon) + pick(suffixes);
  const b = pick(lexicon);
  switch (int(0, 4)) {
    case 0: return `${pick(verbsLex)}${cap(a)}${cap(b)}`;
    case 1: return `${a}_${b}`;
    case 2: return `${cap(a)}${cap(b)}`;
    case 3: return `${pick(verbsLex)}_${a}_${b}`;
    default: return `${a.toUpperCase()}_${b.toUpperCase()}`;
  }
}

function codeBlock(): string {
  const fn = identifier();
  const x = identifier();
  const y = identifier();
  const lines = [
    `function ${fn}(${x}, ${y}) {`,
    `  const ${identifier()} = ${x}.${pick(verbsLex)}(${int(0, 64)});`,
    `  if (${y} > ${int(1, 999)}) return ${x};`,
    `  // ${cap(pick(verbsLex))} the ${pick(lexicon)} before the ${pick(lexicon)}.`,
    `  return ${y}.${identifier()}(${x});`,
    '}',
  ];
  return lines.join('\n');
}

function glossary(): string {
  const out: string[] = [];
  for (let i = 0; i < int(4, 8); i++) {
    const w = pick(lexicon);
    out.push(`${cap(w)}${pick(suffixes)}: a ${pick(adjectives)} ${pick(lexicon)}${pick(suffixes)} near the ${pick(lexicon)}, unlike the ${pick(lexicon)} or the ${pick(lexicon)}.`);
  }
  return out.join('\n');
}

const parts: string[] = [];
let size = 0;
const target = 520_000;
while (size < target) {
  const kind = int(0, 11);
  const text = kind < 3 ? paragraph() : kind < 5 ? dialogue() : kind < 6 ? toolExchange() : kind < 7 ? list() : kind < 8 ? report() : kind < 10 ? codeBlock() : glossary();
  parts.push(text);
  size += text.length + 2;
}
const out = path.join(path.dirname(fileURLToPath(import.meta.url)), 'generated.txt');
fs.writeFileSync(out, parts.join('\n\n') + '\n');
process.stderr.write(`wrote ${out} (${size} bytes)\n`);
