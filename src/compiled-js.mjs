// @ts-check
/**
 * The JavaScript build of kvtier's TypeScript, so that a process (or a worker
 * thread) starts on plain node instead of through tsx's loader. tsx runs its
 * ESM hooks on a thread of their own in every thread that registers them and
 * answers each import from there: a `kvtier serve` start cost 3.5 s of CPU
 * through tsx and 1.75 s from this build; an engine thread 1.25 s and 0.39 s
 * (bench/RESULTS.md, "Suite time: process starts").
 *
 *   checkout/src/cli/main.ts ──esbuild, one file each, types stripped──▶
 *   checkout/.kvtier-js/<key>/src/cli/main.js      ('./x.ts' specifiers → './x.js')
 *
 * Invariants:
 * - <key> hashes the path and bytes of every source file, esbuild's version
 *   and FORMAT: a build is only ever used for the exact sources it was made
 *   from, so an edited checkout can never run stale code; it gets a new build.
 * - A build is made in a private directory and renamed into place, so a reader
 *   sees a whole build or none; two processes that build at once both succeed
 *   and one rename wins (the other copy is discarded).
 * - The build lives inside the checkout, so `node_modules` resolves as from
 *   the sources; the directories read at run time (the native addons, the
 *   dashboard assets, the corpus) are symlinks back into the checkout.
 * - No build (a read-only checkout, esbuild missing, KVTIER_JS=0): callers
 *   run the .ts through tsx as before, and say why once on stderr unless
 *   KVTIER_JS=0 asked for it.
 *
 * Plain JavaScript because it runs before any TypeScript loader exists.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Bumped when the transform below changes what it writes for the same sources. */
const FORMAT = 1;
const CHECKOUT = fileURLToPath(new URL('..', import.meta.url)).replace(/[\\/]$/, '');
const SOURCE_DIRS = ['src', 'inference-core', 'storage-adapters', 'native'];
/** A test's child scripts import the sources and test helpers: their build holds both, under its own key. */
const WITH_TESTS = [...SOURCE_DIRS, 'test'];
/** Read at run time relative to the module that reads them; linked, not copied. */
const LINKED_DIRS = ['native/build', 'src/serve/dashboard/assets', 'inference-core/assets'];
const OUT_DIR = join(CHECKOUT, '.kvtier-js');
/** Builds unused this long are removed when a new build is made (a running process keeps touching its own). */
const STALE_MS = 24 * 3600_000;

/**
 * Per process, the last answer and the sizes and times of the files it hashed: a later call (another
 * thread started by a long-lived process, a vitest watch run after an edit) hashes again only when a file
 * changed, so it never starts a thread on a build of sources that are no longer there.
 * @type {Map<boolean, { stamp: string, result: { root: string | null, why: string } }>}
 */
const memo = new Map();

/** The source files: .ts (compiled) and .mjs (copied), outside the linked and build directories. */
function sourceFiles(/** @type {readonly string[]} */ dirs) {
  /** @type {string[]} */
  const files = [];
  const walk = (/** @type {string} */ dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const rel = relative(CHECKOUT, path);
      if (entry.isDirectory()) {
        if (entry.name === 'node_modules' || entry.name === 'build' || LINKED_DIRS.includes(rel.split(sep).join('/'))) continue;
        walk(path);
      } else if ((entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) || entry.name.endsWith('.mjs')) {
        files.push(rel);
      }
    }
  };
  for (const dir of dirs) if (existsSync(join(CHECKOUT, dir))) walk(join(CHECKOUT, dir));
  return files.sort();
}

/** `'./x.ts'` and `'../y/x.ts'` string literals (imports, `new URL(…)`) name the built `.js` sibling. */
function retarget(/** @type {string} */ code) {
  return code.replace(/(['"`])(\.\.?\/[^'"`\n]*?)\.ts\1/g, '$1$2.js$1');
}

/** @param {string[]} files @param {string} esbuildVersion */
function keyOf(files, esbuildVersion) {
  const hash = createHash('sha256').update(`${FORMAT}\0${esbuildVersion}\0`);
  for (const file of files) hash.update(file).update('\0').update(readFileSync(join(CHECKOUT, file))).update('\0');
  return hash.digest('hex').slice(0, 16);
}

/** @param {string[]} files @param {typeof import('esbuild')} esbuild @param {string} into */
function buildInto(files, esbuild, into) {
  const ts = files.filter((file) => file.endsWith('.ts'));
  const result = esbuild.buildSync({
    entryPoints: ts.map((file) => join(CHECKOUT, file)),
    outdir: into,
    outbase: CHECKOUT,
    bundle: false,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    write: false,
    logLevel: 'silent',
  });
  for (const out of result.outputFiles) {
    mkdirSync(dirname(out.path), { recursive: true });
    writeFileSync(out.path, retarget(out.text));
  }
  for (const file of files.filter((f) => f.endsWith('.mjs'))) {
    mkdirSync(dirname(join(into, file)), { recursive: true });
    copyFileSync(join(CHECKOUT, file), join(into, file));
  }
  for (const dir of LINKED_DIRS) {
    if (!existsSync(join(CHECKOUT, dir))) continue;
    const link = join(into, dir);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(relative(dirname(link), join(CHECKOUT, dir)), link);
  }
}

/** Marks a build as in use for removeStale; best effort: a read-only checkout (a build baked into an image) cannot be marked, and needs no cleaning. */
function touch(/** @type {string} */ root) {
  try {
    const now = new Date();
    utimesSync(root, now, now);
  } catch (error) {
    const code = /** @type {NodeJS.ErrnoException} */ (error).code;
    if (code !== 'EROFS' && code !== 'EACCES' && code !== 'EPERM') throw error;
  }
}

function removeStale(/** @type {string} */ keep) {
  const now = Date.now();
  for (const name of readdirSync(OUT_DIR)) {
    const path = join(OUT_DIR, name);
    if (name === keep) continue;
    try {
      if (now - statSync(path).mtimeMs > STALE_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // another process removed it first
    }
  }
}

/** The build for the sources as they are now (made if missing), or null and why; `withTests`: test/ too. */
export function compiledRoot(withTests = false) {
  if (process.env.KVTIER_JS === '0') return { root: null, why: '' };
  let files;
  try {
    files = sourceFiles(withTests ? WITH_TESTS : SOURCE_DIRS);
  } catch (error) {
    return { root: null, why: error instanceof Error ? error.message : String(error) };
  }
  const stamp = files.map((file) => {
    const stat = statSync(join(CHECKOUT, file));
    return `${file}\0${stat.size}\0${stat.mtimeMs}`;
  }).join('\n');
  const known = memo.get(withTests);
  if (known && known.stamp === stamp) return known.result;
  const result = build(files);
  memo.set(withTests, { stamp, result });
  return result;
}

function build(/** @type {string[]} */ files) {
  try {
    const require = createRequire(import.meta.url);
    const esbuildVersion = JSON.parse(readFileSync(require.resolve('esbuild/package.json'), 'utf8')).version;
    const key = keyOf(files, esbuildVersion);
    const root = join(OUT_DIR, key);
    if (existsSync(root)) {
      touch(root);
      return { root, why: '' };
    }
    const scratch = join(OUT_DIR, `.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`);
    mkdirSync(scratch, { recursive: true });
    try {
      buildInto(files, /** @type {typeof import('esbuild')} */ (require('esbuild')), scratch);
      renameSync(scratch, root);
    } catch (error) {
      rmSync(scratch, { recursive: true, force: true });
      // Lost the race: another process renamed a whole build of the same sources into place first.
      if (!existsSync(root)) throw error;
    }
    removeStale(key);
    return { root, why: '' };
  } catch (error) {
    return { root: null, why: error instanceof Error ? error.message : String(error) };
  }
}

let warned = false;

/**
 * The built twin of a .ts module of this checkout (a file: URL), or null when
 * there is none: run the .ts through tsx then. Says once on stderr why there
 * is no build.
 * @param {URL} tsModule
 * @returns {URL | null}
 */
export function compiledModule(tsModule) {
  const rel = relative(CHECKOUT, fileURLToPath(tsModule));
  const { root, why } = compiledRoot(rel.startsWith(`test${sep}`));
  if (!root) {
    if (why && !warned) process.stderr.write(`kvtier: running through tsx, no JavaScript build (${why}); KVTIER_JS=0 skips the build\n`);
    warned = true;
    return null;
  }
  const built = join(root, rel.replace(/\.ts$/, '.js'));
  // Not one of the built sources (a test's own thread script): tsx runs it.
  return existsSync(built) ? pathToFileURL(built) : null;
}

// `node src/compiled-js.mjs` (npm install) makes the build ahead of the first start.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { root, why } = compiledRoot();
  if (!root) {
    process.stderr.write(`kvtier: no JavaScript build (${why}); kvtier will run through tsx\n`);
  }
}
