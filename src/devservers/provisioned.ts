import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where scripts/provision.sh installs the servers; must match its CACHE (unset or empty: the default). */
export function provisionCache(): string {
  return process.env.COMPACTION_LEASE_CACHE || join(homedir(), '.cache', 'compaction-lease');
}

export const PROVISION_HINT = 'run `eval "$(scripts/provision.sh)"` first';
