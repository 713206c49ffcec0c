// lib/browser.mjs: Debian's chromium, headless, through puppeteer-core, for
// the tests of the store's web view.
//   launch(): a browser (CHROMIUM, default /usr/bin/chromium);
//   ready(page): waits until the page's router has drawn the current view;
//   ARTIFACTS: where screenshots go (PROFLINK_ARTIFACTS, default
//   tests/interop/artifacts/, kept by CI).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const ARTIFACTS = process.env.PROFLINK_ARTIFACTS || path.join(here, '..', 'artifacts');
export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

export async function launch() {
  return puppeteer.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'],
    defaultViewport: { width: 1400, height: 900 },
  });
}

export async function ready(page) {
  await page.waitForFunction(() => document.body.dataset.ready === '1', { timeout: 20000 });
}
