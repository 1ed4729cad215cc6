/**
 * Where a worker's settings come from: the library's path reads the Runtime's from the environment before anything
 * creates a Runtime; the CLI's worker reads everything from its context, its flags over it.
 */
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { contextFromEnv } from '../../src/cli/context';
import { SettingsError } from '../../src/config';
import { startWorkerFromEnv } from '../../src/worker/from-env';

describe('startWorkerFromEnv', () => {
  it('rejects a COMPACTION_LOG_LEVEL that is not a level before it connects', async () => {
    await expect(startWorkerFromEnv({ env: { COMPACTION_LOG_LEVEL: 'chatty' } })).rejects.toThrow(SettingsError);
  });

  it('rejects a COMPACTION_WORKER_ROLE that is not a role before it connects', async () => {
    await expect(
      startWorkerFromEnv({
        installRuntime: false,
        env: { COMPACTION_WORKER_ROLE: 'gc', TEMPORAL_ADDRESS: '127.0.0.1:1' },
      }),
    ).rejects.toThrow('COMPACTION_WORKER_ROLE must be one of all, compaction, collector, not "gc"');
  });

  it('installs the Runtime at COMPACTION_LOG_LEVEL, and opens no store when Temporal is unreachable', async () => {
    const storePath = join(mkdtempSync(join(tmpdir(), 'from-env-')), 'store.sqlite');
    await expect(
      startWorkerFromEnv({
        env: { COMPACTION_LOG_LEVEL: 'debug', TEMPORAL_ADDRESS: '127.0.0.1:1', COMPACTION_EMBEDDED_STORE: storePath },
      }),
    ).rejects.toThrow();
    expect((Runtime.instance().logger as DefaultLogger).level).toBe('DEBUG');
    expect(existsSync(storePath)).toBe(false);
  });
});

describe("the CLI's worker setup", () => {
  const formatModule = join(__dirname, '..', 'support', 'binary-format-module.mts');
  const env = {
    COMPACTION_WORKER_ROLE: 'collector',
    COMPACTION_COLLECTOR_TASK_QUEUE: 'gc-queue',
    COMPACTION_TASK_QUEUE: 'jobs',
    COMPACTION_FORMAT_MODULE: formatModule,
  };

  it("reads role, queue and format module from the context's environment, not the process's", async () => {
    const setup = await contextFromEnv(env).workerSetup({});
    expect({ role: setup.role, taskQueue: setup.taskQueue, format: setup.format?.label }).toEqual({
      role: 'collector',
      taskQueue: 'gc-queue',
      format: `${formatModule} (compactor, rootCodec)`,
    });
    expect(process.env.COMPACTION_FORMAT_MODULE).toBeUndefined();
  });

  it('takes --role and --format over the environment, and the queue of that role', async () => {
    const setup = await contextFromEnv({ ...env, COMPACTION_FORMAT_MODULE: './no-such-format.mjs' }).workerSetup({
      role: 'compaction',
      formatModule,
    });
    expect({ role: setup.role, taskQueue: setup.taskQueue, format: setup.format?.label }).toEqual({
      role: 'compaction',
      taskQueue: 'jobs',
      format: `${formatModule} (compactor, rootCodec)`,
    });
  });
});
