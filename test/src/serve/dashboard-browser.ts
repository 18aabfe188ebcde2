/**
 * The headless Chromium the dashboard tests drive (Debian's, installed by the
 * pretest), and the page listeners that collect anything a user would see as
 * broken: console errors and warnings, page errors, failed requests and 4xx/5xx
 * answers.
 */
import { chromium, type Browser, type Page } from 'playwright-core';

export function launchDashboardBrowser(): Promise<Browser> {
  return chromium.launch({
    // The machine is shared: give a slow start time rather than fail.
    timeout: 300_000,
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

/** Problems the page shows from now on; `expect(problems).toEqual([])` at the end of a test. */
export function collectPageProblems(page: Page, options: { httpErrors?: boolean } = {}): string[] {
  const problems: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') problems.push(`${message.type()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  page.on('requestfailed', (request) => problems.push(`requestfailed: ${request.url()}`));
  if (options.httpErrors) {
    page.on('response', (response) => {
      if (response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
    });
  }
  return problems;
}
