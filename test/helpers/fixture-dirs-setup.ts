/** A vitest setup file: the data dirs the fixtures made go with the test file (fixture-dirs.ts). */
import { afterAll } from 'vitest';

import { removeFixtureDirs } from './fixture-dirs.ts';

afterAll(() => removeFixtureDirs());
