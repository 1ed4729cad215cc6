import { describe, expect, it } from 'vitest';
import { freePort, startOnFreePorts } from '../../src/devservers/ports';

describe('freePort', () => {
  it('never hands out the same port twice in one process, even to concurrent callers', async () => {
    const ports = await Promise.all(Array.from({ length: 200 }, () => freePort()));
    expect(new Set(ports).size).toBe(ports.length);
  });

  it('does not hand out a port a caller fixed for a server', async () => {
    const fixed = await freePort();
    await startOnFreePorts(fixed, () => Promise.resolve());
    const ports = await Promise.all(Array.from({ length: 50 }, () => freePort()));
    expect(ports).not.toContain(fixed);
  });
});

describe('startOnFreePorts', () => {
  const clash = new Error(
    'temporal exited with code 1; log ends with: listen tcp 127.0.0.1:45759: bind: address already in use',
  );

  it('starts again when a chosen port was taken before the server bound it', async () => {
    let calls = 0;
    const started = await startOnFreePorts(undefined, () =>
      ++calls < 3 ? Promise.reject(clash) : Promise.resolve('up'),
    );
    expect([started, calls]).toEqual(['up', 3]);
  });

  it('gives up after the last attempt and rethrows the clash', async () => {
    let calls = 0;
    await expect(startOnFreePorts(undefined, () => (calls++, Promise.reject(clash)), 2)).rejects.toBe(clash);
    expect(calls).toBe(2);
  });

  it('does not retry other failures, nor a clash on a port the caller fixed', async () => {
    let calls = 0;
    const other = new Error('MinIO binary does not exist');
    await expect(startOnFreePorts(undefined, () => (calls++, Promise.reject(other)))).rejects.toBe(other);
    await expect(startOnFreePorts(45759, () => (calls++, Promise.reject(clash)))).rejects.toBe(clash);
    expect(calls).toBe(2);
  });

  it('beside a port the caller fixed, starts again when one it chose itself was taken', async () => {
    let calls = 0;
    const started = await startOnFreePorts(7233, () => (++calls < 2 ? Promise.reject(clash) : Promise.resolve('up')));
    expect([started, calls]).toEqual(['up', 2]);
  });
});
