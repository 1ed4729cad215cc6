/** A real browser for UI tests: Debian's chromium driven by playwright-core, on a fresh profile. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Page } from 'playwright-core';

/** `npx playwright install` needs the internet; CI installs the distribution's chromium instead (.ci/run). */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

// The machine reaches only package registries: nothing may phone home or wait on a network it cannot reach.
const OFFLINE_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export interface UiBrowser {
  readonly page: Page;
  close(): Promise<void>;
}

/** Headless chromium on a new user-data dir (removed again on close), one page of 1280×900. */
export async function openBrowser(): Promise<UiBrowser> {
  const profile = await mkdtemp(join(tmpdir(), 'compaction-lease-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: OFFLINE_FLAGS,
    viewport: { width: 1280, height: 900 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    page,
    async close() {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
