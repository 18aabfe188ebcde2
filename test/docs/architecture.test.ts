/**
 * The folder boundaries of docs/architecture.md, checked against the code:
 * every relative import (static or dynamic) of a source file may only reach
 * the folders its row allows. A new dependency across folders is a design
 * change: update the table in docs/architecture.md and ALLOWED here together.
 *
 * The door rule: an import that crosses into another folder of the table goes
 * through that folder's index.ts, never to a file behind it, so each folder's
 * surface is the one file that says what it offers.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

/** Most specific first: a file belongs to the first folder that contains it. */
const FOLDERS = ['native', 'inference-core', 'storage-adapters', 'src/kvtier', 'src/cluster', 'src/stats', 'src/admin', 'src/recipe', 'src/scheduler', 'src/workers', 'src/serve', 'src/replay', 'src/cli', 'src'] as const;
type Folder = (typeof FOLDERS)[number];

/** `src` is the top-level files of src/ (config.ts, errors.ts, index.ts). */
const ALLOWED: Record<Folder, Folder[]> = {
  native: [],
  'inference-core': ['native'],
  'storage-adapters': [],
  'src/kvtier': ['storage-adapters', 'native'],
  'src/cluster': ['src/kvtier', 'src'],
  'src/stats': [],
  'src/admin': ['src/kvtier', 'src/stats', 'storage-adapters', 'src'],
  'src/recipe': ['inference-core', 'src'],
  'src/scheduler': ['inference-core', 'src/kvtier', 'src/cluster', 'storage-adapters', 'src', 'native'],
  'src/workers': ['inference-core', 'src/kvtier', 'src/cluster', 'src/stats', 'src/scheduler', 'storage-adapters', 'src', 'native'],
  'src/serve': ['inference-core', 'src/kvtier', 'src/cluster', 'src/stats', 'src/admin', 'src/recipe', 'src/scheduler', 'src/workers', 'storage-adapters', 'src', 'native'],
  'src/replay': ['src/kvtier', 'src/stats', 'storage-adapters'],
  'src/cli': ['src/replay', 'inference-core', 'src/kvtier', 'src/cluster', 'src/stats', 'src/admin', 'src/recipe', 'src/scheduler', 'src/workers', 'src/serve', 'storage-adapters', 'src', 'native'],
  src: ['src/kvtier', 'src/serve', 'src/scheduler', 'src/workers', 'src/cluster', 'src/stats', 'src/recipe', 'inference-core', 'storage-adapters', 'native'],
};

function folderOf(path: string): Folder | undefined {
  const rel = relative(ROOT, path);
  for (const folder of FOLDERS) if (rel === folder || rel.startsWith(folder + '/')) return folder;
  return undefined;
}

function tsFiles(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'build') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) tsFiles(path, out);
    else if (/\.(ts|mts)$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

const IMPORT = /(?:from\s+|import\(\s*)'(\.{1,2}\/[^']+)'/g;

describe('folder boundaries (docs/architecture.md)', () => {
  const files = ['native', 'inference-core', 'storage-adapters', 'src'].flatMap((dir) => tsFiles(join(ROOT, dir)));

  it('reads the source', () => {
    expect(files.length).toBeGreaterThan(200);
  });

  it('imports only across the boundaries the table allows', () => {
    const violations: string[] = [];
    for (const file of files) {
      const from = folderOf(file);
      if (!from) continue;
      for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
        const to = folderOf(normalize(join(dirname(file), match[1]!)));
        if (!to || to === from || ALLOWED[from].includes(to)) continue;
        violations.push(`${relative(ROOT, file)} → ${match[1]} (${from} may not import ${to})`);
      }
    }
    expect(violations).toEqual([]);
  });

  it('imports into another folder go through its index.ts (the door rule)', () => {
    const bypasses: string[] = [];
    for (const file of files) {
      const from = folderOf(file);
      if (!from) continue;
      for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
        const target = normalize(join(dirname(file), match[1]!));
        const to = folderOf(target);
        // src's top-level files (config.ts, errors.ts, …) are each their own door.
        if (!to || to === from || to === 'src' || relative(ROOT, target) === join(to, 'index.ts')) continue;
        bypasses.push(`${relative(ROOT, file)} → ${match[1]}`);
      }
    }
    expect(bypasses, 'imports past a folder door').toEqual([]);
  });

  it('is the table the architecture doc shows', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'architecture.md'), 'utf8');
    for (const folder of FOLDERS) if (folder !== 'src') expect(doc, folder).toContain(`\`${folder}/\``);
  });
});
