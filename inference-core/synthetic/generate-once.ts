import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * `file` if it exists, else `write` makes it: into a temp name first, renamed
 * into place when finished, so generators racing on one path (two test forks)
 * never expose a partial file to each other.
 */
export function generateOnce(file: string, write: (tempPath: string) => void): string {
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tempPath = `${file}.${process.pid}.tmp`;
  write(tempPath);
  fs.renameSync(tempPath, file);
  return file;
}
