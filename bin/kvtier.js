#!/usr/bin/env node
// The `kvtier` command: registers tsx's loader in this process and runs the
// TypeScript CLI, so no build step is needed and signals (SIGTERM, SIGKILL)
// reach the process that does the work, not a wrapper around it.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
