/**
 * The node arguments that run a test's child script (a .ts under test/): its
 * JavaScript build on plain node when there is one (src/compiled-js.mjs; a
 * child then starts on a third of the CPU), else the .ts through tsx.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';

import { compiledModule } from '../../src/compiled-js.mjs';

export function childArgs(script: string): string[] {
  const built = compiledModule(pathToFileURL(script));
  return built ? [fileURLToPath(built)] : ['--import', 'tsx', script];
}
