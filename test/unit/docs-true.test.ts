/**
 * What README.md and docs/*.md state about the code, checked against the code: the settings and their
 * defaults (against their declaration, src/config/declaration.ts), the constants they quote, the search attributes, the
 * compaction outcomes, the CLI's
 * commands and options, and the folders of src/. Seen failing on the docs before they were corrected:
 * the activity slots' default (21 000, the code's is 11 000), a 30 s heartbeat timeout (450 000),
 * derived defaults stated with no value to check, an owner id of another shape than the code's, an
 * outcome list without `unchanged`, the layout table without `cli`, `conformance` and `reader`, and a
 * constant the code no longer has.
 */
import type { Command } from 'commander';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as entry from '../../src';
import { buildProgram } from '../../src/cli/program';
import type { CliContext } from '../../src/cli/context';
import { SEARCH_ATTRIBUTES } from '../../src/client/search-attributes';
import { DEFAULT_WORKER_TIMEOUT_MS, LIVE_POLLER_WINDOW_MS } from '../../src/client/workers';
import { WORKER_HEARTBEAT_INTERVAL_MS } from '../../src/worker/runtime';
import * as recurring from '../../src/compactor/recurring';
import { defaultsByVariable, PROCESS_SETTINGS, SETTING_TABLES, SETTINGS_ENV } from '../../src/config';
import * as segments from '../../src/segments';
import type { CompactionOutcomeName } from '../../src/workflows/compaction';

const root = join(__dirname, '..', '..');
const docNames = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const docs = docNames.map((name) => ({ name, text: readFileSync(join(root, name), 'utf8') }));
const readme = docs[0]!.text;

/** Unset: the setting has no default value (the code does without it). A name: the default is that setting's value. */
type CodeDefault = number | string | undefined;

/**
 * Every `COMPACTION_*` setting declared (src/config/declaration.ts), with its default as the docs state
 * it: the owner id by its shape, the collector's queue by the setting it defaults to.
 */
function declaredDefaults(): Map<string, CodeDefault> {
  const defaults = new Map(
    [...defaultsByVariable()].map(([name, value]) => [
      name,
      value === undefined ? undefined : typeof value === 'number' ? value : String(value),
    ]),
  );
  defaults.set(SETTINGS_ENV.ownerId, '{pid}@{hostname}');
  defaults.set(PROCESS_SETTINGS.collectorTaskQueue.env, PROCESS_SETTINGS.taskQueue.env);
  return defaults;
}

/**
 * The outcomes of `compactionWorkflow`: the compiler holds this object to exactly the members of
 * `CompactionOutcomeName`.
 */
const OUTCOMES: Record<CompactionOutcomeName, true> = {
  published: true,
  unchanged: true,
  fenced: true,
  abandoned: true,
  superseded: true,
};

const UNITS: Record<string, number> = {
  '': 1,
  KiB: 1024,
  MiB: 1024 ** 2,
  GiB: 1024 ** 3,
  ms: 1,
  s: 1000,
  min: 60_000,
  h: 3_600_000,
  day: 86_400_000,
  days: 86_400_000,
};

/**
 * A default as the docs state it: its quantities (every one must be the default), else its first literal, else
 * "unset"/"off".
 */
type Stated =
  | { readonly quantities: number[] }
  | { readonly literal: string }
  | { readonly unset: true }
  | { readonly unreadable: string };

function statedDefault(text: string): Stated {
  const literals = [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  const prose = text.replace(/`[^`]+`/g, ' ').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
  // "5 × refresh" is a factor, not a quantity; "262 144" and "11,000" are one number.
  const quantities = [
    ...prose.matchAll(
      /(?<![\w.])(\d{1,3}(?:[ ,]\d{3})+|\d+(?:\.\d+)?)(?!\s*×)(?: ?(KiB|MiB|GiB|ms|min|days?|h|s)(?![A-Za-z]))?/g,
    ),
  ].map((m) => Number(m[1]!.replace(/[ ,]/g, '')) * UNITS[m[2] ?? '']!);
  if (quantities.length) return { quantities };
  if (literals.length) return { literal: literals[0]! };
  if (/^(unset|off)\b/.test(prose.trim())) return { unset: true };
  return { unreadable: text };
}

/** Whether `stated` says what the code does: `undefined` when it does, else what it gets wrong. */
function disagreement(stated: Stated, code: CodeDefault, codeSays = "the code's default"): string | undefined {
  if ('unreadable' in stated)
    return `states no value (${JSON.stringify(stated.unreadable)}): give the default as a number, a literal or "unset"`;
  if ('unset' in stated) return code === undefined ? undefined : `says unset, ${codeSays} is ${code}`;
  if (code === undefined) return 'states a default, the code has none';
  if ('literal' in stated)
    return stated.literal === String(code) ? undefined : `says ${stated.literal}, ${codeSays} is ${code}`;
  const wrong = stated.quantities.filter((q) => q !== code);
  return wrong.length ? `says ${wrong.join(', ')}, ${codeSays} is ${code}` : undefined;
}

/** The rows of every markdown table, cells trimmed, with the table's header. */
function tables(markdown: string): { header: string[]; rows: string[][] }[] {
  const found: { header: string[]; rows: string[][] }[] = [];
  const cells = (line: string) =>
    line
      .trim()
      .replace(/^\||\|$/g, '')
      .split(' | ')
      .map((c) => c.trim());
  let block: string[] = [];
  for (const line of [...markdown.split('\n'), '']) {
    if (line.startsWith('|')) block.push(line);
    else {
      if (block.length > 2) found.push({ header: cells(block[0]!), rows: block.slice(2).map(cells) });
      block = [];
    }
  }
  return found;
}

/** Each setting a settings table (one with a "default" column) states, with the stated default and where. */
function tabledSettings(): { doc: string; name: string; stated: Stated }[] {
  return docs.flatMap(({ name: doc, text }) =>
    tables(text).flatMap(({ header, rows }) => {
      const column = header.indexOf('default');
      if (column < 0) return [];
      // docs/protocol.md names its settings without the prefix its header gives.
      const prefix = header[0]!.includes('`COMPACTION_…`') ? 'COMPACTION_' : '';
      return rows.flatMap((row) =>
        [...row[0]!.matchAll(/`([A-Z][A-Z0-9_]*)`/g)]
          .map((m) => `${prefix}${m[1]}`)
          .filter((name) => name.startsWith('COMPACTION_'))
          .map((name) => ({ doc, name, stated: statedDefault(row[column]!) })),
      );
    }),
  );
}

/** "`NAME` (default V", "`NAME`, default V", "`NAME` (V by default)" and "`NAME` (30 days)" in running text. */
function proseDefaults(): { doc: string; name: string; stated: Stated }[] {
  const pattern =
    /`(COMPACTION_[A-Z0-9_]+)`(?:,? \(?default ([^;)]+)| \(([^()]+?) by default\)| \((\d[\d ,.]*(?: ?[A-Za-z/]+)?)\))/g;
  return docs.flatMap(({ name: doc, text }) =>
    [...text.replace(/\s+/g, ' ').matchAll(pattern)].map((m) => ({
      doc,
      name: m[1]!,
      stated: statedDefault((m[2] ?? m[3] ?? m[4])!),
    })),
  );
}

/** A context for building the command tree: a command that ran would fail the test. */
const unusedContext = new Proxy({} as CliContext, {
  get: (_, member) => {
    throw new Error(`building the program used ctx.${String(member)}`);
  },
});

/** The inline code spans of `markdown`, outside fenced blocks; a span opened by two backticks closes at two. */
const codeSpans = (markdown: string): string[] =>
  [...markdown.replace(/^```[\s\S]*?^```$/gm, '').matchAll(/(`+)(?!`)([\s\S]+?)(?<!`)\1(?!`)/g)].map((m) => m[2]!);

/**
 * Every `compaction-lease …` and `npm run cli -- …` the docs write, in shell blocks and code spans, without its
 * comment.
 */
function documentedCommands(): { doc: string; command: string }[] {
  const invocation = /^(?:[A-Z_]+=\S+ )*(?:npx )?(?:compaction-lease|npm run cli --) (.+)$/;
  return docs.flatMap(({ name: doc, text }) => {
    const shellLines = [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].flatMap((m) =>
      m[1]!.split('\n').map((line) => line.replace(/ +#.*$/, '').trim()),
    );
    const spans = codeSpans(text).map((span) => span.replace(/\s+/g, ' ').trim());
    return [...shellLines, ...spans].flatMap((line) => {
      const command = invocation.exec(line)?.[1];
      // `compaction-lease <command>` names the form, not a command.
      return command && !command.startsWith('<') ? [{ doc, command }] : [];
    });
  });
}

/** Why `command` is not one the program has (a command word or an option it lacks), or undefined. */
function unknownInCommand(program: Command, command: string): string | undefined {
  const words = command
    .replace(/'[^']*'|"[^"]*"/g, 'ARG')
    .replace(/[[\]]/g, ' ')
    .split(/\s+/)
    .filter(Boolean);
  let at = program;
  let i = 0;
  for (; i < words.length; i++) {
    const sub = at.commands.find((c) => c.name() === words[i] || c.aliases().includes(words[i]!));
    if (!sub) break;
    at = sub;
  }
  if (at === program) return `no command ${words[0]}`;
  if (at.commands.length && i < words.length) return `${at.name()} has no command ${words[i]}`;
  const options = new Set(['--help', ...at.options.flatMap((o) => [o.long, o.short])]);
  const unknown = words.slice(i).filter((w) => w.startsWith('-') && !options.has(w.split('=')[0]));
  return unknown.length ? `no option ${unknown.join(', ')} on ${at.name()}` : undefined;
}

describe('the docs say what the code does', () => {
  it('every setting a settings table or the text states is declared, with its declared default', () => {
    const code = declaredDefaults();
    const stated = [...tabledSettings(), ...proseDefaults()];
    expect(stated.length).toBeGreaterThan(40);
    const wrong = stated.flatMap(({ doc, name, stated: s }) => {
      if (!code.has(name)) return [`${doc}: ${name} is no declared setting`];
      const problem = disagreement(s, code.get(name), 'the declared default');
      return problem ? [`${doc}: ${name} ${problem}`] : [];
    });
    expect(wrong).toEqual([]);
  });

  it("the README's configuration table states every declared setting with a variable, src/ names none but through the declaration, and the docs name no other", () => {
    const code = declaredDefaults();
    const declaration = join(root, 'src', 'config', 'declaration.ts');
    const named = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true, recursive: true })
        .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
        .map((entry) => join(entry.parentPath, entry.name))
        .filter((file) => file !== declaration && !file.includes(join('src', 'devservers')))
        .flatMap((file) =>
          [...readFileSync(file, 'utf8').matchAll(/'(COMPACTION_[A-Z0-9_]+)'/g)].map(
            (m) => `${file.slice(root.length + 1)}: ${m[1]}`,
          ),
        );
    // Declared once: any other module takes a variable's name from its declaration.
    expect(named(join(root, 'src'))).toEqual([]);
    expect(
      SETTING_TABLES.flatMap((table) =>
        Object.values(table).flatMap((declared) => ('env' in declared ? [declared.env] : [])),
      ).sort(),
    ).toEqual([...code.keys()].sort());
    const table = readme.slice(readme.indexOf('## Configuration'));
    const tabled = new Set([...table.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]));
    expect([...code.keys()].filter((name) => !tabled.has(name))).toEqual([]);
    // Elsewhere a name may be a script's (the tool cache of scripts/provision.sh).
    const scripts = readdirSync(join(root, 'scripts'))
      .map((name) => readFileSync(join(root, 'scripts', name), 'utf8'))
      .join('\n');
    const inDocs = docs.flatMap(({ name: doc, text }) =>
      [...text.matchAll(/\b(COMPACTION_[A-Z0-9_]*[A-Z0-9])\b/g)].map((m) => ({ doc, name: m[1]! })),
    );
    expect(
      inDocs.filter(({ name }) => !code.has(name) && !scripts.includes(name)).map(({ doc, name }) => `${doc}: ${name}`),
    ).toEqual([]);
  });

  it('every list of the search attributes is SEARCH_ATTRIBUTES, and every query names one of them', () => {
    const expected = Object.keys(SEARCH_ATTRIBUTES).sort();
    const lists = docs
      .flatMap(({ name: doc, text }) =>
        [
          ...text
            .replace(/\s+/g, ' ')
            .matchAll(/search attributes\s*[:|]?\s*((?:`[A-Za-z]+`(?: \([^)]*\))?(?:,|;| and)? ?)+)/g),
        ].map((m) => ({
          doc,
          names: [...m[1]!.matchAll(/`([A-Za-z]+)`/g)].map((n) => n[1]!),
        })),
      )
      .filter(({ names }) => names.length > 1);
    expect(lists.length).toBeGreaterThan(1);
    for (const { doc, names } of lists) expect([doc, [...names].sort()]).toEqual([doc, expected]);
    const queried = docs.flatMap(({ name: doc, text }) =>
      [...text.matchAll(/`((?:Compaction|Gc)[A-Za-z]+) = /g)].map((m) => `${doc}: ${m[1]}`),
    );
    expect(queried.length).toBeGreaterThan(0);
    expect(queried.filter((q) => !(q.split(': ')[1]! in SEARCH_ATTRIBUTES))).toEqual([]);
  });

  it('every list of compaction outcomes is all of them, and every outcome named is one', () => {
    const expected = Object.keys(OUTCOMES).sort();
    const lists = docs.flatMap(({ name: doc, text }) =>
      [...text.matchAll(/`([a-z]+(?: \| [a-z]+)+)`/g)]
        .map((m) => m[1]!.split(' | '))
        .filter((words) => words.includes('published'))
        .map((words) => ({ doc, words })),
    );
    expect(lists.length).toBeGreaterThan(1);
    for (const { doc, words } of lists) expect([doc, [...words].sort()]).toEqual([doc, expected]);
    const named = docs.flatMap(({ name: doc, text }) =>
      [...text.matchAll(/`CompactionOutcome = "?([a-z]+)/g)].map((m) => ({ doc, outcome: m[1]! })),
    );
    expect(named.filter(({ outcome }) => !(outcome in OUTCOMES))).toEqual([]);
  });

  it('every compaction-lease command the docs write is one the CLI registers, with options it has', () => {
    const program = buildProgram(unusedContext);
    const commands = documentedCommands();
    expect(commands.length).toBeGreaterThan(30);
    const wrong = commands.flatMap(({ doc, command }) => {
      const problem = unknownInCommand(program, command);
      return problem ? [`${doc}: compaction-lease ${command}: ${problem}`] : [];
    });
    expect(wrong).toEqual([]);
  });

  it('every constant the docs quote with a value is one of the code, of that value', () => {
    const constants: Record<string, unknown> = {
      ...recurring,
      ...segments,
      ...entry,
      DEFAULT_WORKER_TIMEOUT_MS,
      LIVE_POLLER_WINDOW_MS,
      WORKER_HEARTBEAT_INTERVAL_MS,
    };
    const quoted = docs.flatMap(({ name: doc, text }) =>
      [
        ...text
          .replace(/\s+/g, ' ')
          .matchAll(/`([A-Z][A-Z0-9_]*[A-Z0-9])`(?:, | \()(\d[\d ,.]*(?: ?(?:KiB|MiB|GiB|ms|min|h|s)\b)?)/g),
      ]
        .filter((m) => !m[1]!.startsWith('COMPACTION_'))
        .map((m) => ({ doc, name: m[1]!, stated: statedDefault(m[2]!) })),
    );
    expect(quoted.length).toBeGreaterThan(5);
    const wrong = quoted.flatMap(({ doc, name, stated }) => {
      const value = constants[name];
      if (typeof value !== 'number') return [`${doc}: ${name} is no numeric constant of the code`];
      const problem = disagreement(stated, value, "the code's value");
      return problem ? [`${doc}: ${name} ${problem}`] : [];
    });
    expect(wrong).toEqual([]);
  });

  it("the README's layout table and docs/architecture.md's layers name every folder of src/, and only folders that exist", () => {
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
    const layout = readme.slice(readme.indexOf('### Layout'));
    const [table] = tables(layout);
    const tabled = table!.rows.flatMap((row) => [...row[0]!.matchAll(/`src\/([^`]+)`/g)].map((m) => m[1]!));
    expect([...new Set(tabled.filter((name) => !name.endsWith('.ts')))].sort()).toEqual(folders);
    expect(tabled.filter((name) => name.endsWith('.ts') && !existsSync(join(root, 'src', name)))).toEqual([]);
    // The layers: each line's leading names, up to its description.
    const architecture = docs.find(({ name }) => name === 'docs/architecture.md')!.text;
    const [layers] = [...architecture.matchAll(/^```text\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
    const entries = new Set(readdirSync(join(root, 'src')));
    const layered = layers!.split('\n').flatMap((line) => {
      const names: string[] = [];
      for (const word of line
        .replace(/\([^)]*\)/g, ' ')
        .split(/\s+/)
        .filter(Boolean)) {
        if (!entries.has(word)) break;
        names.push(word);
      }
      return names;
    });
    expect(folders.filter((folder) => !layered.includes(folder))).toEqual([]);
  });
});
