/** Writes the golden lease files of test/golden once; the unit tests then hold the codec to them byte for byte. */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jobId, namespaceId } from '../src/keys';
import { claimLeaseState, createLeaseState, encodeLease, refreshLeaseState } from '../src/lease';

const active = refreshLeaseState(
  createLeaseState({ jobId: jobId('cmp_0123456789abcdef0123456789abcdef'), namespaceId: namespaceId('demo'), ownerId: 'worker-7@host', nowMs: 1000 }),
  3000,
);
const dir = join(__dirname, '..', 'test', 'golden');
writeFileSync(join(dir, 'lease-active.json'), encodeLease(active));
writeFileSync(join(dir, 'lease-reaping.json'), encodeLease(claimLeaseState(active)));
