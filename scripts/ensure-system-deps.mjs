#!/usr/bin/env node
// pretest: the test suite starts real services (redis-server, Ceph RGW for S3,
// Chromium for the dashboard). Install the Debian packages that are missing when
// we are root; otherwise stop and print the exact command to run.
import { execFileSync, spawnSync } from 'node:child_process';

/** command on PATH → Debian packages that provide it (and what it needs beside it). */
const required = [
  { command: 'redis-server', packages: ['redis-server'] },
  // test/helpers/ceph-s3.ts runs each of these to start its loopback cluster
  { command: 'radosgw', packages: ['radosgw'] },
  { command: 'ceph-mon', packages: ['ceph-mon'] },
  { command: 'ceph-osd', packages: ['ceph-osd'] },
  { command: 'monmaptool', packages: ['ceph-base'] },
  { command: 'ceph-authtool', packages: ['ceph-common'] },
  { command: 'radosgw-admin', packages: ['ceph-common'] },
  { command: 'ceph', packages: ['ceph-common'] },
  { command: 'chromium', packages: ['chromium'] },
  // the chat-template tests render with jinja2 as transformers does (test/helpers/jinja2-render.ts
  // tries $KVTIER_JINJA2_PYTHON, /usr/bin/python3, then python3 on PATH); the ggml reference
  // tests call libggml-base through python3's ctypes
  { command: 'python3', packages: ['python3'] },
  { check: () => ['/usr/bin/python3', 'python3'].some(pythonHasJinja2), packages: ['python3-jinja2'] },
];

function onPath(command) {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

function pythonHasJinja2(python) {
  return spawnSync(python, ['-c', 'import jinja2'], { stdio: 'ignore' }).status === 0;
}

const present = (r) => (r.check ? r.check() : onPath(r.command));
const missing = [...new Set(required.filter((r) => !present(r)).flatMap((r) => r.packages))];
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
