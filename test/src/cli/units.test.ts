import { describe, expect, it } from 'vitest';

import { formatBytes, formatDuration, parseDuration, parseSize } from '../../../src/cli/commands/index.ts';

describe('durations and sizes', () => {
  it('parses what operators type', () => {
    expect(parseDuration('90m', '--ttl')).toBe(90 * 60_000);
    expect(parseDuration('72h', '--ttl')).toBe(72 * 3_600_000);
    expect(parseDuration('3d', '--ttl')).toBe(3 * 86_400_000);
    expect(parseDuration('1w', '--ttl')).toBe(7 * 86_400_000);
    expect(parseDuration('1.5h', '--ttl')).toBe(90 * 60_000);
    expect(parseSize('500GiB', '--quota')).toBe(500 * 2 ** 30);
    expect(parseSize('10MB', '--quota')).toBe(10_000_000);
    expect(parseSize('4096', '--quota')).toBe(4096);
    expect(parseSize('0', '--quota')).toBe(0);
  });

  it('rejects the rest with a message naming the flag', () => {
    expect(() => parseDuration('3x', '--ttl')).toThrow('--ttl 3x is not a duration');
    expect(() => parseDuration('-3d', '--ttl')).toThrow('cannot be negative');
    expect(() => parseDuration('0m', '--ttl')).toThrow('longer than zero');
    expect(() => parseDuration('d', '--ttl')).toThrow('is not a duration');
    expect(() => parseSize('-5', '--quota')).toThrow('--quota -5: a size cannot be negative');
    expect(() => parseSize('5 parsecs', '--quota')).toThrow('is not a size');
  });

  it('formats back', () => {
    expect(formatDuration(3 * 86_400_000)).toBe('3d');
    expect(formatDuration(90 * 60_000)).toBe('1h 30m');
    expect(formatBytes(500 * 2 ** 30)).toBe('500 GiB');
    expect(formatBytes(1536)).toBe('1.50 KiB');
  });
});
