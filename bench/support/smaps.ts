/**
 * Where a process's resident memory is, by mapping, as the kernel counts it (`/proc/PID/smaps`): what
 * no JavaScript heap reports (the SDK's native core, mapped code, the allocator, V8 pages outside the
 * heaps' counts) told apart by what backs it.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

/** V8's regular heap page: an anonymous mapping of this size (or a run of them) is the JavaScript heap's. */
const V8_PAGE_BYTES = 256 * 1024;

/** Resident bytes of one kind of mapping, and how many mappings. */
export interface MappedKind {
  readonly kind: string;
  readonly mappings: number;
  readonly rssBytes: number;
}

/**
 * The kind of a mapping: its file's name, `[heap]` (malloc's main arena), a thread stack, or for an
 * anonymous one whether its size is whole V8 pages (the kernel merges neighbouring pages into one
 * mapping, so this is V8's heaps and whatever else happens to be so sized) or not (malloc's arenas
 * and the rest).
 */
function kindOf(name: string, sizeBytes: number): string {
  if (name.startsWith('/')) return basename(name);
  if (name !== '') return name.startsWith('[stack') ? '[stack]' : name;
  return sizeBytes % V8_PAGE_BYTES === 0 ? 'anon ×256 KiB' : 'anon other';
}

/** Every kind of mapping of `pid` with its resident bytes, largest first; empty once the process is gone. */
export function residentByMapping(pid: number): MappedKind[] {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return [];
  }
  const byKind = new Map<string, { mappings: number; rssBytes: number }>();
  let kind = '';
  for (const line of text.split('\n')) {
    const header = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (header) {
      kind = kindOf(header[3]!, Number.parseInt(header[2]!, 16) - Number.parseInt(header[1]!, 16));
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (!rss) continue;
    const entry = byKind.get(kind) ?? { mappings: 0, rssBytes: 0 };
    entry.mappings += 1;
    entry.rssBytes += Number(rss[1]) * 1024;
    byKind.set(kind, entry);
  }
  return [...byKind].map(([k, e]) => ({ kind: k, ...e })).sort((a, b) => b.rssBytes - a.rssBytes);
}

/** The `top` largest kinds in one line, MiB. */
export function describeMappings(kinds: readonly MappedKind[], top = 8): string {
  const mib = (b: number) => (b / 2 ** 20).toFixed(0);
  const rest = kinds.slice(top).reduce((sum, k) => sum + k.rssBytes, 0);
  return [
    ...kinds.slice(0, top).map((k) => `${k.kind} ${mib(k.rssBytes)}${k.mappings > 1 ? ` (${k.mappings})` : ''}`),
    `the rest ${mib(rest)}`,
  ].join(', ');
}
