/** What a message, report or failure quotes is bounded, whatever the bucket holds (issue 28, item 5). */
import { describe, expect, it } from 'vitest';
import { bounded, QUOTE_LIMIT } from '../../src/errors';
import { emptyReport, mergeReport, REPORT_LIST_BYTES } from '../../src/collector/report';

describe('bounded quotes', () => {
  it('a text within the bound is quoted whole', () => {
    expect(bounded('x'.repeat(QUOTE_LIMIT))).toBe('x'.repeat(QUOTE_LIMIT));
  });

  it('a longer text is cut to the bound and names its length and a digest of the whole', () => {
    const text = 'y'.repeat(8 * 1024 * 1024);
    const cut = bounded(text);
    expect(cut.startsWith('y'.repeat(QUOTE_LIMIT) + '… (8388608 characters, digest ')).toBe(true);
    expect(cut.length).toBeLessThan(QUOTE_LIMIT + 60);
  });

  it('two long texts that differ only past the bound have different digests', () => {
    const head = 'z'.repeat(QUOTE_LIMIT * 2);
    expect(bounded(`${head}a`)).not.toBe(bounded(`${head}b`));
  });

  it('every list of a merged report stays under its byte bound, however long its entries', () => {
    const long = 'k'.repeat(64 * 1024);
    const entries = Array.from({ length: 100 }, (_, i) => ({
      key: `${i}${long}`,
      reason: long,
      message: long,
      namespaceId: `${i}`,
      problem: 'corrupt' as const,
    }));
    const report = mergeReport(emptyReport(0, false), {
      corruptLeases: entries,
      failures: entries,
      rootProblems: entries,
      unrecognisedKeys: entries.map((e) => e.key),
      corruptNamespaces: entries.map((e) => e.key),
    });
    for (const list of [
      report.corruptLeases,
      report.failures,
      report.rootProblems,
      report.unrecognisedKeys,
      report.corruptNamespaces,
    ]) {
      expect(list.length).toBeGreaterThan(0);
      expect(JSON.stringify(list).length).toBeLessThanOrEqual(REPORT_LIST_BYTES);
    }
    expect(JSON.stringify(report).length).toBeLessThan(256 * 1024);
  });
});
