/**
 * How commands print: JSON for scripts (`--json`), aligned text for people; results to stdout, the one-line error to
 * stderr.
 */

export interface Output {
  /** One line of results (stdout). */
  line(text: string): void;
  /** One line naming a problem and its fix (stderr). */
  error(text: string): void;
}

export const processOutput: Output = {
  line: (text) => void process.stdout.write(`${text}\n`),
  error: (text) => void process.stderr.write(`${text}\n`),
};

export const printJson = (out: Output, value: unknown): void => out.line(JSON.stringify(value, null, 2));

/** An ISO timestamp for people; JSON output keeps the protocol's milliseconds. */
export const isoTime = (ms: number | undefined): string => (ms === undefined ? '-' : new Date(ms).toISOString());

/** `label  value` pairs, labels padded to one width. */
export function printFields(out: Output, fields: readonly (readonly [string, unknown])[]): void {
  const width = Math.max(...fields.map(([label]) => label.length));
  for (const [label, value] of fields) out.line(`${label.padEnd(width)}  ${String(value)}`);
}

export type Row = Readonly<Record<string, string | number>>;

/**
 * A table written a page at a time. Each column keeps the width of its widest cell in the first page
 * (and its header), so later pages line up under it; a longer cell later only shifts its own row.
 * The last column is never padded: put the one of unbounded width there.
 */
export function tableWriter(out: Output, columns: readonly string[]): { rows(rows: readonly Row[]): void } {
  let widths: number[] | undefined;
  return {
    rows(rows) {
      const cells = rows.map((r) => columns.map((c) => String(r[c] ?? '-')));
      if (!widths) {
        const header = columns.map((c) => c.toUpperCase());
        const first = [header, ...cells];
        widths = columns.map((_, i) => Math.max(...first.map((row) => (row[i] as string).length)));
        cells.unshift(header);
      }
      const fixed = widths;
      for (const row of cells)
        out.line(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(fixed[i] as number))).join('  '));
    },
  };
}

/** A JSON array written an element at a time, so a listing of any length streams out page by page. */
export function jsonArrayWriter(out: Output): { item(value: unknown): void; end(): void } {
  let count = 0;
  return {
    item(value) {
      out.line(`${count++ === 0 ? '[' : ','}${JSON.stringify(value)}`);
    },
    end() {
      out.line(count === 0 ? '[]' : ']');
    },
  };
}
