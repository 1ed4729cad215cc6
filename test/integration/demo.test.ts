/**
 * The demo (src/main.ts) assembles its worker as every entry point does, so it honours the same settings, the format
 * module included.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { DEFAULT_GC_SCHEDULE_ID } from '../../src/client/schedule';
import { namespaceId } from '../../src/keys';
import { readRoot } from '../../src/protocol';
import { createEmbeddedObjectStore } from '../../src/store';
import { readBinaryGroup, sampleBinaryInputs, textRootCodec, writeBinaryInputs } from '../support/binary-format';
import { connectClient, uniqueId } from '../support/temporal';

const demoMain = join(__dirname, '..', '..', 'src', 'main.ts');

describe('the demo', () => {
  it("runs its worker with COMPACTION_FORMAT_MODULE's plug-ins: the binary inputs a writer left publish in the text root", async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'demo-')), 'store.sqlite');
    const store = createEmbeddedObjectStore({ path });
    const ns = namespaceId('demo');
    const module = join(__dirname, '..', 'support', 'binary-format-module.mts');
    const { client, close } = await connectClient();
    try {
      const inputs = await writeBinaryInputs(store, ns, 'bindings', sampleBinaryInputs(2, 50));
      const expected = await readBinaryGroup(store, inputs);
      const env = {
        ...process.env,
        NODE_NO_WARNINGS: '1',
        TEMPORAL_ADDRESS: inject('temporalAddress'),
        COMPACTION_EMBEDDED_STORE: path,
        COMPACTION_TASK_QUEUE: uniqueId('demo-tq'),
        COMPACTION_FORMAT_MODULE: module,
      };
      const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', demoMain, '--once'], { env });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.once('error', reject);
        child.once('close', (code) => resolve({ code, stdout, stderr }));
      });
      expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
      expect(run.stdout).toMatch(new RegExp(`^worker .*, format ${module} \\(compactor, rootCodec\\)$`, 'm'));
      expect(run.stdout).toMatch(/^outcome published: job cmp_\w+, 2 inputs → \d+ outputs/m);
      const outputs = (await readRoot(store, ns, textRootCodec)).root.groups.bindings ?? [];
      expect(outputs.length).toBeGreaterThan(0);
      expect(outputs.every((key) => key.endsWith('.lpb'))).toBe(true);
      expect(await readBinaryGroup(store, outputs)).toEqual(expected);
    } finally {
      // The demo leaves the collector's schedule behind for its user; on the shared test server it goes.
      await client.schedule
        .getHandle(DEFAULT_GC_SCHEDULE_ID)
        .delete()
        .catch(() => undefined);
      await close();
      await store.close();
    }
  });
});
