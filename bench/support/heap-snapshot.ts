/**
 * Where a worker's JavaScript heap goes: a V8 heap snapshot (`.heapsnapshot`) summed by node type and
 * constructor (self sizes: what each kind of object itself holds, not what it keeps alive). A
 * snapshot covers the main thread's heap only: workflow threads and the SDK's Rust core are outside it.
 */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** One kind of heap object: V8's node type and, for objects and closures, its constructor or function name. */
export interface HeapKind {
  readonly kind: string;
  readonly count: number;
  readonly bytes: number;
}

/** Every kind of object in the snapshot with its count and self size, largest first, and the heap's total. */
export function heapByKind(path: string): { kinds: HeapKind[]; totalBytes: number } {
  const snap = JSON.parse(readFileSync(path, 'utf8')) as Snapshot;
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const byKind = new Map<string, { count: number; bytes: number }>();
  let totalBytes = 0;
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + typeAt]!]!;
    const bytes = snap.nodes[i + sizeAt]!;
    // Strings, code and arrays are named by their content: summed by type alone.
    const named = type === 'object' || type === 'closure' || type === 'native';
    const kind = named ? `${type} ${snap.strings[snap.nodes[i + nameAt]!]}` : `(${type})`;
    const entry = byKind.get(kind) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += bytes;
    byKind.set(kind, entry);
    totalBytes += bytes;
  }
  const kinds = [...byKind].map(([kind, e]) => ({ kind, ...e })).sort((a, b) => b.bytes - a.bytes);
  return { kinds, totalBytes };
}

/** The `top` largest kinds as lines, each with its count and bytes per `per` (a held lease, say). */
export function describeHeap(path: string, top: number, per: number): string {
  const { kinds, totalBytes } = heapByKind(path);
  const kib = (b: number) => (b / 1024).toFixed(1);
  return [
    `  heap snapshot ${path}: ${(totalBytes / 2 ** 20).toFixed(0)} MiB in the main thread's heap, ${kib(totalBytes / per)} KiB per lease`,
    ...kinds
      .slice(0, top)
      .map(
        (k) =>
          `    ${k.kind.slice(0, 60).padEnd(60)} ${String(k.count).padStart(9)} × ${(k.count / per).toFixed(2).padStart(7)}/lease ${(k.bytes / 2 ** 20).toFixed(1).padStart(8)} MiB ${kib(k.bytes / per).padStart(7)} KiB/lease`,
      ),
  ].join('\n');
}

/**
 * What `path` holds beyond `base` (another worker's snapshot: the bare floor's, say), kind by kind, per `per`: the
 * `top` kinds that differ most either way.
 */
export function describeHeapBeyond(path: string, base: string, top: number, per: number): string {
  const [a, b] = [heapByKind(path), heapByKind(base)];
  const kib = (bytes: number) => (bytes / 1024 / per).toFixed(1);
  const before = new Map(b.kinds.map((k) => [k.kind, k]));
  const kinds = new Set([...a.kinds.map((k) => k.kind), ...before.keys()]);
  const after = new Map(a.kinds.map((k) => [k.kind, k]));
  const rows = [...kinds]
    .map((kind) => ({
      kind,
      count: (after.get(kind)?.count ?? 0) - (before.get(kind)?.count ?? 0),
      bytes: (after.get(kind)?.bytes ?? 0) - (before.get(kind)?.bytes ?? 0),
    }))
    .sort((x, y) => Math.abs(y.bytes) - Math.abs(x.bytes));
  return [
    `  ${path} beyond ${base}: ${kib(a.totalBytes - b.totalBytes)} KiB per lease`,
    ...rows
      .slice(0, top)
      .map(
        (k) =>
          `    ${k.kind.slice(0, 60).padEnd(60)} ${(k.count / per).toFixed(2).padStart(8)}/lease ${kib(k.bytes).padStart(7)} KiB/lease`,
      ),
  ].join('\n');
}

if (require.main === module) {
  const [path, per = '1', top = '40', base] = process.argv.slice(2);
  if (!path) throw new Error('usage: tsx bench/support/heap-snapshot.ts FILE [LEASES] [TOP] [BASE_FILE]');
  console.log(
    base ? describeHeapBeyond(path, base, Number(top), Number(per)) : describeHeap(path, Number(top), Number(per)),
  );
}
