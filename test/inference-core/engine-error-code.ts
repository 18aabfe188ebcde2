// The engine suites' check of a typed failure (kept out of engine-fixtures.ts, which the benchmarks import too).
import { expect } from 'vitest';

import { EngineError } from '../../inference-core/engine/index.ts';

/** The code of the EngineError `fn` throws (anything else thrown fails the test); undefined when it returns. */
export function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(EngineError);
    return (e as EngineError).code;
  }
  return undefined;
}
