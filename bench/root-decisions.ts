/**
 * The collector's per-key decisions and planPublication at the scale of a large root, pure and in
 * process: a root of 100,000 referenced keys in 10 groups and 50,000 retired ones, decoded from its
 * bytes as a pass reads it. Prints the machine, then:
 *  - a 1,000-key page of `metadata/segments/` classified (`decideSegment`), the first page of a root
 *    read (which builds the root's index) and the mean of the next ones; target < 100 ms;
 *  - a 1,000-key page of a job prefix judged by the walk (`isRetainedByRoot`);
 *  - `planPublication` replacing 50,000 inputs of one group by 500 outputs; target < 1 s.
 * Run: `eval "$(scripts/provision.sh)" && npx tsx bench/root-decisions.ts`
 * Options: --referenced N (default 100000), --retired N (default 50000), --inputs N (default 50000),
 *          --pages N (pages classified, default 5).
 */
import { cpus, loadavg } from 'node:os';
import { familyGroup, inputSegmentKey, namespaceId, newJobId, newSegmentId, stagedSegmentKey } from '../src/keys';
import { decideSegment, isRetainedByRoot } from '../src/collector/retired';
import type { RetiredRules } from '../src/collector/rules';
import { decodeRoot, encodeRoot, planPublication, type RootState } from '../src/root';

const option = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const REFERENCED = option('referenced', 100_000);
const RETIRED = option('retired', 50_000);
const INPUTS = option('inputs', 50_000);
const GROUPS = 10;
const PAGE = 1000;
const PAGES = option('pages', 5);

const ns = namespaceId('bench-root');
const nowMs = 10 * 86_400_000;
const rules: RetiredRules = { nowMs, readerGraceMs: 3_600_000, lostWriteGraceMs: 86_400_000 };
const inputKey = () => inputSegmentKey(ns, newSegmentId(), 'mseg');

/** Half the retired keys are due, half in their reader grace. */
function buildRoot(): RootState {
  const groups: Record<string, string[]> = {};
  for (let g = 0; g < GROUPS; g++) groups[`group${g}`] = Array.from({ length: REFERENCED / GROUPS }, inputKey);
  const retired = Array.from({ length: RETIRED }, (_, i) => ({
    key: inputKey(),
    retired_at_ms: i % 2 ? nowMs - 2 * rules.readerGraceMs : nowMs - 1000,
  }));
  return { namespace_id: ns, generation: 1, groups, retired };
}

const ms = (start: number) => performance.now() - start;
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** A page as a listing returns it: a third referenced, a third retired, a third unknown to the root. */
function pageOf(root: RootState, page: number): { key: string; lastModified: Date }[] {
  const referenced = Object.values(root.groups).flat();
  const retired = root.retired ?? [];
  return Array.from({ length: PAGE }, (_, i) => {
    const at = page * PAGE + i;
    const key =
      i % 3 === 0 ? referenced[at % referenced.length]! : i % 3 === 1 ? retired[at % retired.length]!.key : inputKey();
    return { key, lastModified: new Date(nowMs - 2 * rules.lostWriteGraceMs) };
  });
}

const built = buildRoot();
const bytes = encodeRoot(built);
let start = performance.now();
const root = decodeRoot(bytes, ns);
const decodeMs = ms(start);

const pages = Array.from({ length: PAGES }, (_, p) => pageOf(root, p));
const classify = (page: readonly { key: string; lastModified: Date }[]) => {
  const t = performance.now();
  for (const o of page) decideSegment(root, o.key, o.lastModified, rules);
  return ms(t);
};
const [first, ...rest] = pages.map(classify);

const job = newJobId();
const staged = Array.from({ length: PAGE }, (_, i) =>
  i % 2 ? stagedSegmentKey(ns, job, newSegmentId(), 'mseg') : pageOf(root, 0)[i]!.key,
);
// A fresh decode, so the walk's first judgement pays for the index as a re-read root would.
const reread = decodeRoot(bytes, ns);
start = performance.now();
for (const key of staged) isRetainedByRoot(reread, key, rules);
const walkMs = ms(start);

const group = familyGroup('group0');
const wide: RootState = { ...root, groups: { ...root.groups, [group]: Array.from({ length: INPUTS }, inputKey) } };
const inputs = wide.groups[group]!;
const outputs = Array.from({ length: 500 }, () => stagedSegmentKey(ns, job, newSegmentId(), 'mseg'));
start = performance.now();
const plan = planPublication(wide, { group, inputs, outputs, retiredAtMs: nowMs });
const planMs = ms(start);
if (plan.kind !== 'publish') throw new Error('the publication was not planned');

const cpu = cpus();
console.log(
  `machine: ${cpu[0]?.model ?? 'unknown cpu'}, ${cpu.length} cores, node ${process.version}, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(
  `root: ${REFERENCED} referenced in ${GROUPS} groups + ${RETIRED} retired, ${(bytes.length / 1e6).toFixed(1)} MB, decoded in ${decodeMs.toFixed(0)} ms`,
);
const next = rest.length ? `, next ${rest.length} pages ${mean(rest).toFixed(2)} ms each` : '';
console.log(
  `decideSegment, 1,000-key page: first after the read ${first!.toFixed(1)} ms (index built)${next} (target < 100 ms)`,
);
console.log(`isRetainedByRoot, 1,000-key page of a job prefix on a fresh read: ${walkMs.toFixed(1)} ms`);
console.log(
  `planPublication, ${INPUTS} inputs → ${outputs.length} outputs: ${planMs.toFixed(0)} ms (target < 1000 ms)`,
);
