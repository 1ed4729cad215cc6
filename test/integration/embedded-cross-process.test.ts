import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { openTestStore } from '../support/stores';

const run = promisify(execFile);
const child = join(__dirname, '..', 'support', 'embedded-cas-child.ts');

describe('embedded store across processes', () => {
  it('exactly one of 6 processes racing a CAS on one ETag wins, 5 rounds', async () => {
    const { store, path } = await openTestStore('embedded');
    for (let round = 0; round < 5; round++) {
      const key = `race/${round}`;
      const { etag } = await store.putIfAbsent(key, new TextEncoder().encode('start'));
      const startAt = String(Date.now() + 1500);
      const outcomes = await Promise.all(
        Array.from({ length: 6 }, () =>
          run(process.execPath, ['--import', 'tsx', child, path!, key, etag, startAt]).then((r) => r.stdout),
        ),
      );
      expect(
        outcomes.filter((o) => o === 'won'),
        `outcomes: ${outcomes.join(', ')}`,
      ).toHaveLength(1);
      expect(outcomes.filter((o) => o !== 'won').every((o) => o === 'PreconditionFailedError')).toBe(true);
    }
    await store.close();
  });
});
