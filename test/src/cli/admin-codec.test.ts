/**
 * `kvtier policy set --codec NAME [--class C] [--force]`: on a data directory
 * (no engine to measure a codec on, so one other than none needs --force, as
 * in BullMQ mode) and against a running server (int8 measured within its
 * bound on synthetic:tiny: no --force). Mistakes are one line naming the flag.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import type { RetentionPolicyDoc } from '../../../src/kvtier/index.ts';
import { admin } from '../serve/admin-fixtures.ts';
import { ADMIN_TOKEN, startTestServer } from '../serve/server-fixture.ts';
import { expectOneLineError, kvtier } from './cli-runner.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close(), 240_000);

describe('kvtier policy set --codec', () => {
  it('on a data directory: unmeasured without --force, set with it, shown by policy show; usage mistakes name the flag', async () => {
    const local = ['--data-dir', mkdtempSync(join(tmpdir(), 'kvtier-cli-codec-'))];
    expectOneLineError(await kvtier(['policy', 'set', '--codec', 'int8', ...local]), /KVT_ERR_POLICY_CODEC_UNMEASURED|not been measured/, 1);
    const forced = await kvtier(['policy', 'set', '--codec', 'int8', '--force', ...local]);
    expect(forced.code).toBe(0);
    expect(forced.stdout).toMatch(/new blocks: codec int8 \(forced\)/);
    const perClass = await kvtier(['policy', 'set', '--class', 'agent', '--codec', 'fp8', '--force', '--json', ...local]);
    expect(perClass.code).toBe(0);
    expect((JSON.parse(perClass.stdout) as { policy: RetentionPolicyDoc }).policy.classes.agent).toMatchObject({ codec: 'fp8', ttlMs: 3 * 86_400_000 });
    const withTtl = await kvtier(['policy', 'set', '--class', 'chat', '--ttl', '1d', '--codec', 'none', ...local]);
    expect(withTtl.stdout).toMatch(/class chat: ttl 1d, codec none/);
    expect((await kvtier(['policy', 'show', ...local])).stdout).toMatch(/^block codec: int8 \(classes: agent=fp8 chat=none\)$/m);

    expectOneLineError(await kvtier(['policy', 'set', '--codec', 'zstd', ...local]), /--codec must be one of none, int8, fp8, int4, got "zstd"/, 2);
    expectOneLineError(await kvtier(['policy', 'set', '--class', 'chat', '--ttl', '1d', '--force', ...local]), /--force goes with --codec/, 2);
    expectOneLineError(await kvtier(['policy', 'set', '--tenant', 'acme', '--codec', 'int8', ...local]), /--codec goes alone or with --class/, 2);
    expectOneLineError(await kvtier(['policy', 'set', '--class', 'batch', '--ttl', '1d', '--add', '--codec', 'int8', ...local]), /add the class first/, 2);
    expectOneLineError(await kvtier(['policy', 'set', '--class', 'nope', '--codec', 'int8', '--force', ...local]), /unknown class "nope"/, 1);
  }, 240_000);

  it('against a server: measured on the served model, no --force needed; the server serves the new codec', async () => {
    const conn = ['--url', server().url, '--token', ADMIN_TOKEN];
    const set = await kvtier(['policy', 'set', '--codec', 'int8', ...conn]);
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(/new blocks: codec int8; stored blocks keep theirs \(policy v\d+, applied\)/);
    const perClass = await kvtier(['policy', 'set', '--class', 'chat', '--codec', 'fp8', ...conn]);
    expect(perClass.code).toBe(0);
    const served = (await admin<RetentionPolicyDoc>(server().url, '/admin/policy')).body;
    expect(served.codec).toBe('int8');
    expect(served.classes.chat.codec).toBe('fp8');
    expectOneLineError(await kvtier(['policy', 'set', '--class', 'nope', '--codec', 'int8', ...conn]), /unknown class "nope"/);
  }, 240_000);
});
