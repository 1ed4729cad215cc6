/**
 * Embedded store benchmark: what the SQLite driver under `src/store/embedded.ts` costs.
 *  1. operations through the ObjectStore port, on a fresh file per run: putIfAbsent, head and get
 *     of lease-sized objects, a CAS chain (putIfMatch) on one key, list pages, a large object put
 *     and read back in chunks, deleteMany; each adapter given runs in turn, round after round, and
 *     the median round is printed side by side;
 *  2. `--install`: the install cost a consumer pays, the packed tarball installed into an empty
 *     project with install scripts on (peer dependencies included, as npm installs them), then the
 *     same with each `--add` package beside it; seconds and the size of node_modules.
 * Run: `eval "$(scripts/provision.sh node)" && npx tsx bench/embedded-store.ts [--install]`
 * To set node:sqlite beside the better-sqlite3 adapter it replaced (the tree before 4d417ea, kept
 * out of src/ so that `npm pack` builds only the package):
 *   mkdir -p /tmp/previous && git archive 4d417ea~1 src | tar -x -C /tmp/previous
 *   npm install --prefix /tmp/bs3 better-sqlite3@12.11.1    # builds from source: minutes
 *   NODE_PATH=/tmp/bs3/node_modules:$PWD/node_modules npx tsx bench/embedded-store.ts \
 *     --adapters src/store/embedded.ts,/tmp/previous/src/store/embedded.ts \
 *     --install --add better-sqlite3@12.11.1
 * Options: --keys N (lease-sized objects, default 2000), --large-mib M (default 64), --rounds R
 *          (default 3), --adapters A[,B…] (modules exporting createEmbeddedObjectStore).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import type { EmbeddedStoreOptions } from '../src/store/embedded';
import type { ObjectStore } from '../src/store/port';

const root = join(__dirname, '..');

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : fallback;
}
const options = (name: string): string[] =>
  process.argv.flatMap((arg, i) => (arg === `--${name}` && process.argv[i + 1] ? [process.argv[i + 1] as string] : []));

const KEYS = Number(option('keys', '2000'));
const LARGE_BYTES = Number(option('large-mib', '64')) * 1024 * 1024;
const ROUNDS = Number(option('rounds', '3'));
/** A lease object's order of size (docs/protocol.md): what most embedded-store traffic is. */
const SMALL_BYTES = 300;
/** Whole listings per round: one takes milliseconds, too short to time alone. */
const LISTINGS = 20;

type Rates = Record<string, number>;

/** One round on a fresh file: each phase's rate, in operations (or MB for the large object) per second. */
async function round(store: ObjectStore): Promise<Rates> {
  const rates: Rates = {};
  const timed = async (label: string, count: number, step: () => Promise<unknown>) => {
    const started = performance.now();
    await step();
    rates[label] = count / ((performance.now() - started) / 1000);
  };
  const keys = Array.from({ length: KEYS }, (_, i) => `ns/compactions/job-${String(i).padStart(6, '0')}/lease.json`);
  const small = new Uint8Array(SMALL_BYTES).fill(7);
  await timed('putIfAbsent/s', KEYS, async () => {
    for (const key of keys) await store.putIfAbsent(key, small);
  });
  await timed('head/s', KEYS, async () => {
    for (const key of keys) await store.head(key);
  });
  await timed('get/s', KEYS, async () => {
    for (const key of keys) await store.get(key);
  });
  await timed('putIfMatch (CAS)/s', KEYS, async () => {
    let { etag } = await store.putIfAbsent('ns/cas', small);
    for (let i = 0; i < KEYS; i++) ({ etag } = await store.putIfMatch('ns/cas', small, etag));
  });
  await timed('list keys/s', LISTINGS * KEYS, async () => {
    for (let i = 0; i < LISTINGS; i++) {
      let cursor: string | undefined;
      do ({ nextCursor: cursor } = await store.list({ prefix: 'ns/compactions/', cursor }));
      while (cursor);
    }
  });
  const large = new Uint8Array(LARGE_BYTES).map((_, i) => i % 251);
  await timed('large put MB/s', LARGE_BYTES / 1e6, () => store.put('ns/large', large));
  await timed('large stream MB/s', LARGE_BYTES / 1e6, async () => {
    for await (const piece of (await store.getStream('ns/large')).body) void piece;
  });
  await timed('deleteMany keys/s', KEYS, () => store.deleteMany(keys));
  return rates;
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

async function operations(): Promise<void> {
  const adapters = option('adapters', 'src/store/embedded.ts').split(',');
  const factories = await Promise.all(
    adapters.map(
      async (file) =>
        ((await import(resolve(root, file))) as { createEmbeddedObjectStore: (o: EmbeddedStoreOptions) => ObjectStore })
          .createEmbeddedObjectStore,
    ),
  );
  const results = adapters.map((): Rates[] => []);
  for (let r = 0; r < ROUNDS; r++) {
    // Adapters alternate within each round, so a burst of load elsewhere falls on both.
    for (const [i, create] of factories.entries()) {
      const dir = mkdtempSync(join(tmpdir(), 'embedded-bench-'));
      const store = create({ path: join(dir, 'store.sqlite') });
      results[i]!.push(await round(store));
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log(
    `\noperations: ${KEYS} objects of ${SMALL_BYTES} B, one of ${LARGE_BYTES / 1024 / 1024} MiB; median of ${ROUNDS} rounds`,
  );
  console.log(['phase'.padEnd(20), ...adapters.map((a) => a.padStart(40))].join(''));
  for (const phase of Object.keys(results[0]![0]!)) {
    console.log(
      [
        phase.padEnd(20),
        ...results.map((rounds) =>
          median(rounds.map((x) => x[phase]!))
            .toFixed(0)
            .padStart(40),
        ),
      ].join(''),
    );
  }
}

/** Installs `specs` into a new empty project with install scripts on; seconds and node_modules' size. */
function installCost(specs: string[]): { seconds: number; mib: number } {
  const project = mkdtempSync(join(tmpdir(), 'install-bench-'));
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'install-bench', private: true }));
  const started = performance.now();
  execFileSync('npm', ['install', '--no-audit', '--no-fund', ...specs], {
    cwd: project,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const seconds = (performance.now() - started) / 1000;
  const kib = Number(execFileSync('du', ['-sk', join(project, 'node_modules')], { encoding: 'utf8' }).split('\t')[0]);
  rmSync(project, { recursive: true, force: true });
  return { seconds, mib: kib / 1024 };
}

function install(): void {
  const packed = mkdtempSync(join(tmpdir(), 'packed-'));
  execFileSync('npm', ['pack', '--pack-destination', packed], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  const tarball = join(packed, readdirSync(packed).find((f) => f.endsWith('.tgz')) as string);
  console.log('\ninstall into an empty project, install scripts on (npm cache as it is)');
  for (const specs of [[tarball], ...options('add').map((extra) => [tarball, extra])]) {
    const { seconds, mib } = installCost(specs);
    console.log(
      `${specs
        .map((s) => basename(s))
        .join(' + ')
        .padEnd(56)}${seconds.toFixed(1).padStart(8)} s${mib.toFixed(1).padStart(9)} MiB`,
    );
  }
  rmSync(packed, { recursive: true, force: true });
}

async function main(): Promise<void> {
  const cpu = cpus();
  console.log(
    `machine: ${cpu.length} × ${cpu[0]?.model}, load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}; node ${process.version}; sqlite ${process.versions.sqlite}`,
  );
  await operations();
  if (process.argv.includes('--install')) install();
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
