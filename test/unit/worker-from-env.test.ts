/** The library's worker path reads the Runtime's settings from the environment before anything creates a Runtime. */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { SettingsError } from '../../src/config';
import { startWorkerFromEnv } from '../../src/worker/from-env';

describe('startWorkerFromEnv', () => {
  it('rejects a COMPACTION_LOG_LEVEL that is not a level before it connects', async () => {
    await expect(startWorkerFromEnv({ env: { COMPACTION_LOG_LEVEL: 'chatty' } })).rejects.toThrow(SettingsError);
  });

  it('rejects a COMPACTION_WORKER_ROLE that is not a role before it connects', async () => {
    await expect(startWorkerFromEnv({ installRuntime: false, env: { COMPACTION_WORKER_ROLE: 'gc', TEMPORAL_ADDRESS: '127.0.0.1:1' } })).rejects.toThrow(
      'COMPACTION_WORKER_ROLE must be one of all, compaction, collector, not "gc"',
    );
  });

  it('installs the Runtime at COMPACTION_LOG_LEVEL, and opens no store when Temporal is unreachable', async () => {
    const storePath = join(mkdtempSync(join(tmpdir(), 'from-env-')), 'store.sqlite');
    await expect(startWorkerFromEnv({ env: { COMPACTION_LOG_LEVEL: 'debug', TEMPORAL_ADDRESS: '127.0.0.1:1', COMPACTION_EMBEDDED_STORE: storePath } })).rejects.toThrow();
    expect((Runtime.instance().logger as DefaultLogger).level).toBe('DEBUG');
    expect(existsSync(storePath)).toBe(false);
  });
});
