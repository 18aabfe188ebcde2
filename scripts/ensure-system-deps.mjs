#!/usr/bin/env node
// pretest: the test suite starts real services (redis-server, Ceph RGW for S3,
// Chromium for the dashboard). Install the Debian packages that are missing when
// we are root; otherwise stop and print the exact command to run.
import { execFileSync, spawnSync } from 'node:child_process';

/** command on PATH → Debian packages that provide it (and what it needs beside it). */
const required = [
  { command: 'redis-server', packages: ['redis-server'] },
  { command: 'radosgw', packages: ['radosgw', 'ceph-mon', 'ceph-osd', 'ceph-common'] },
  { command: 'chromium', packages: ['chromium'] },
];

function onPath(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

const missing = required.filter((r) => !onPath(r.command)).flatMap((r) => r.packages);
if (missing.length === 0) process.exit(0);

const install = `apt-get update && apt-get install -y --no-install-recommends ${missing.join(' ')}`;
if (process.getuid?.() !== 0) {
  console.error(`kvtier tests need system packages that are missing: ${missing.join(', ')}`);
  console.error(`Run as root:  sudo sh -c '${install}'`);
  process.exit(1);
}
console.error(`[pretest] installing ${missing.join(' ')} …`);
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
execFileSync('apt-get', ['update'], { stdio: 'inherit', env });
execFileSync('apt-get', ['install', '-y', '--no-install-recommends', ...missing], { stdio: 'inherit', env });
