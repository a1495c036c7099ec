// The dashboard's flows in Debian's Chromium, at a desktop and a phone size: one browser for the
// file, a fresh context (cookies, viewport) per flow.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEvents, runs } from '../db/schema/index.ts';
import { newId } from '../lib/ids.ts';
import { loadConfig } from '../runner/config.ts';
import { startHost, type Host } from '../runner/host.ts';
import { provisionExecutor } from '../runner/jobs/provision/executor.ts';
import { executors as allExecutors, bind, type AppExecutors } from '../runner/jobs/registry.ts';
import { provisionJob } from '../functions/provision/job.ts';
import { collectPass, startSimCluster, type SimCluster } from './support/collect-fleet.ts';
import { httpApi } from './support/harness.ts';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, 'screenshots');
const ADMIN = 'browser-flows-admin-' + 'y'.repeat(16);
const SIZES = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;
type Size = keyof typeof SIZES;

let host: Host;
let dataDir: string;
let browser: Browser;
let sims: SimCluster | undefined;

/** Plan runs wait here until the test has the run page open and following the stream. */
const held: Array<() => void> = [];
const [, heldProvision] = bind(provisionJob, async (ctx, params) => {
    if (params.mode === 'plan') {
      await ctx.emit({ type: 'test.wait', message: 'waiting for the test to release the plan' });
      await new Promise<void>((resolve) => held.push(resolve));
    }
    return provisionExecutor(ctx, params);
  });
const executors: AppExecutors = { ...allExecutors(), provision: heldProvision };

/** The runner's API over HTTP, as the collect fixtures take it. */
const http = () => httpApi(host.url, ADMIN, host.deps);
const api = (method: string, path: string, body?: unknown) => http().call(method, path, { body });

let tenantId: string;
let clusterId: string;

/** A cluster of two local (terraform_data) machines, so each plan has something to add. */
async function localCluster(name: string): Promise<string> {
  const c = await api('POST', '/v1/clusters', {
    tenant: tenantId,
    name,
    endpoint: 'https://[2001:db8::1]:6443',
    providerSettings: { local: { apply_delay_seconds: 0 } },
  });
  expect(c.status, JSON.stringify(c.body)).toBe(201);
  for (const [i, m] of ['cp1', 'w1'].entries()) {
    const res = await api('POST', `/v1/clusters/${c.body.id}/machines`, { name: m, role: i === 0 ? 'controlplane' : 'worker', provider: 'local' });
    expect(res.status).toBe(201);
  }
  return c.body.id;
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`browser tests need Chromium at ${CHROMIUM}: install it with "apt-get install -y chromium"`);
  await mkdir(SHOTS, { recursive: true });
  dataDir = await mkdtemp(join(tmpdir(), 'rezus-flows-'));
  const config = loadConfig({
    REZUS_DATA_DIR: dataDir,
    REZUS_HOST: '127.0.0.1',
    REZUS_PORT: '0',
    REZUS_ADMIN_TOKEN: ADMIN,
    REZUS_LOG_LEVEL: 'error',
    REZUS_SHUTDOWN_GRACE_S: '1',
  });
  host = await startHost(config, () => {}, { executors });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const t = await api('POST', '/v1/tenants', { name: 'home' });
  tenantId = t.body.id;
  clusterId = await localCluster('lab');
}, 60_000);

afterAll(async () => {
  for (const release of held.splice(0)) release();
  await browser?.close();
  await sims?.stop();
  await host?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
});

async function signedIn(size: Size): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext({ viewport: SIZES[size], ...(size === 'phone' ? { isMobile: true, hasTouch: true } : {}) });
  context.setDefaultTimeout(15_000);
  const page = await context.newPage();
  await page.goto(`${host.url}/login`);
  await page.getByLabel(/API token/).fill(ADMIN);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`${host.url}/`);
  return { context, page };
}

const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `flows-${name}.png`), fullPage: true });

/** How far the page is wider than the viewport (0 when it fits). */
const overflow = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

describe.each(['desktop', 'phone'] as const)('dashboard flows (%s)', (size) => {
  it('a plan finishes while the page is open and Approve appears without a reload; the diff lists the resources', async () => {
    const name = size === 'desktop' ? 'lab' : 'lab-phone';
    const target = size === 'desktop' ? clusterId : await localCluster(name);
    const { context, page } = await signedIn(size);
    try {
      await page.goto(`${host.url}/clusters/${target}`);
      await page.getByRole('button', { name: 'Plan', exact: true }).click();
      await page.waitForURL(new RegExp(`^${host.url}/runs/run_`));
      const runUrl = page.url();
      // A marker on the window survives only if the page is never reloaded.
      await page.evaluate(() => ((window as unknown as { marker: number }).marker = 42));
      await expect.poll(() => page.locator('#run-live').textContent(), { timeout: 10_000 }).toBe('Following the run live.');
      expect(await page.locator('#approve-run').count()).toBe(0);
      await expect.poll(() => held.length).toBe(1);
      held.shift()!();
      await expect.poll(() => page.locator('#approve-run').count(), { timeout: 60_000 }).toBe(1);
      expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(42);
      expect(page.url()).toBe(runUrl);
      expect(await page.locator('#run-state').textContent()).toBe('succeeded');
      await expect.poll(() => page.locator('#run-live').textContent()).toBe('Run finished: succeeded.');
      // The plan as a diff: every planned resource by address, marked as created.
      const added = await page.locator('ul.diff li.diff-add .mono').allTextContents();
      expect(added.length).toBeGreaterThanOrEqual(2);
      expect(added.every((a) => /^[a-z_]+\.[\w-]+(\[.+\])?/.test(a))).toBe(true);
      expect(await page.locator('.plan-summary').textContent()).toMatch(new RegExp(`^${added.length} to add, 0 to change, 0 to destroy$`));
      expect(await page.locator('#cancel-run').count()).toBe(0);
      expect(await overflow(page)).toBeLessThanOrEqual(0);
      await shot(page, `${size}-plan`);

      await page.locator('#approve-run button').click();
      await page.waitForURL((u) => u.href !== runUrl && /\/runs\/run_/.test(u.href));
      await expect.poll(() => page.locator('#run-state').textContent(), { timeout: 60_000 }).toBe('succeeded');
      expect(await page.locator('h1').textContent()).toBe(`provision (apply) · ${name}`);
      await shot(page, `${size}-apply`);
    } finally {
      await context.close();
    }
  }, 120_000);

  it('runs: names instead of ids, who started them, filters, collect runs hidden by default; cards on a phone', async () => {
    expect((await collectPass(http(), clusterId)).state).toMatch(/succeeded|failed/);
    const { context, page } = await signedIn(size);
    try {
      await page.goto(`${host.url}/runs`);
      const rows = page.locator('table.runs tbody tr');
      expect(await rows.count()).toBeGreaterThanOrEqual(2);
      const text = await page.locator('table.runs').textContent();
      expect(text).toContain('provision · plan');
      expect(text).toContain('lab');
      expect(text).toContain('admin token');
      expect(text).not.toContain('collect');
      expect(text).not.toMatch(/cl_[a-z2-7]{5}/);
      expect(await page.locator('#hidden-collect').textContent()).toMatch(/^\d+ collect runs? hidden/);
      await page.getByLabel('Show collect runs').check();
      await page.getByRole('button', { name: 'Filter' }).click();
      await expect.poll(() => page.locator('table.runs').textContent()).toContain('collect');
      await page.getByLabel('Kind').selectOption('provision');
      await page.getByLabel('State').selectOption('succeeded');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL(/kind=provision&state=succeeded/);
      const kinds = await page.locator('table.runs tbody td[data-label="Run"]').allTextContents();
      expect(kinds.length).toBeGreaterThan(0);
      expect(kinds.every((k) => k.startsWith('provision'))).toBe(true);
      if (size === 'phone') {
        // Cards: the header row is hidden and every cell carries its label.
        expect(await page.locator('table.runs thead').evaluate((e) => e.getBoundingClientRect().height)).toBeLessThanOrEqual(1);
        const card = await rows.first().boundingBox();
        expect(card!.width).toBeLessThanOrEqual(SIZES.phone.width);
        // The page stays short: well under the 6,000 px seen before.
        expect(await page.evaluate(() => document.documentElement.scrollHeight)).toBeLessThan(3000);
      }
      expect(await overflow(page)).toBeLessThanOrEqual(0);
      await shot(page, `${size}-runs`);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('lifecycle: edit and delete a machine and a cluster, downloads, tokens, credentials, webhook secret, audit, backups', async () => {
    const { context, page } = await signedIn(size);
    const suffix = size === 'desktop' ? 'd' : 'p';
    try {
      const t = await api('POST', '/v1/tenants', { name: `life-${suffix}` });
      const c = await api('POST', '/v1/clusters', { tenant: t.body.id, name: `doomed-${suffix}`, endpoint: 'https://[2001:db8::2]:6443' });
      const m = await api('POST', `/v1/clusters/${c.body.id}/machines`, { name: 'node-a', role: 'controlplane', provider: 'metal' });
      await page.goto(`${host.url}/clusters/${c.body.id}`);
      // A cluster not bootstrapped yet offers Bootstrap; the upgrade hint shows the running version.
      expect(await page.locator('#bootstrap').count()).toBe(1);
      const running = c.body.talosVersion as string;
      expect(await page.getByLabel('Talos version').getAttribute('placeholder')).toBe(running);

      // Edit the cluster; a bad value is explained under its field and changes nothing.
      await page.locator('#ce-endpoint').fill('http://nope');
      await page.getByRole('button', { name: 'Save changes' }).click();
      expect(await page.locator('#ce-endpoint-error').textContent()).toMatch(/^must be https:\/\/host:port/);
      expect((await api('GET', `/v1/clusters/${c.body.id}`)).body.endpoint).toBe('https://[2001:db8::2]:6443');
      await page.locator('#ce-endpoint').fill('https://[2001:db8::3]:6443');
      await page.getByRole('button', { name: 'Save changes' }).click();
      await expect.poll(async () => (await api('GET', `/v1/clusters/${c.body.id}`)).body.endpoint).toBe('https://[2001:db8::3]:6443');

      // Downloads go through the session and come as attachments.
      const kube = await context.request.get(`${host.url}/clusters/${c.body.id}/talosconfig`);
      expect(kube.status()).toBe(200);
      expect(kube.headers()['content-disposition']).toContain(`doomed-${suffix}-talosconfig`);
      expect(await kube.text()).toContain('context:');

      // The machine page: edit, then delete.
      await page.getByRole('link', { name: 'node-a' }).first().click();
      await page.waitForURL(new RegExp(`/machines/${m.body.id}$`));
      await page.locator('#me-address').fill('[2001:db8::20]:50000');
      await page.getByRole('button', { name: 'Save changes' }).click();
      await expect.poll(async () => (await api('GET', `/v1/clusters/${c.body.id}/machines/${m.body.id}`)).body.address).toBe('[2001:db8::20]:50000');
      expect(await overflow(page)).toBeLessThanOrEqual(0);
      await page.getByRole('button', { name: 'Delete node-a' }).click();
      await page.waitForURL(`${host.url}/clusters/${c.body.id}`);
      expect(await page.locator('#main').textContent()).toContain('No machines yet.');
      await page.getByRole('button', { name: `Delete doomed-${suffix}` }).click();
      await page.waitForURL(`${host.url}/`);
      expect((await api('GET', `/v1/clusters/${c.body.id}`)).status).toBe(404);

      // The tenant: a token is shown once and can be revoked; credentials show names only.
      await page.goto(`${host.url}/tenants`);
      await page.getByRole('link', { name: `life-${suffix}` }).click();
      await page.getByLabel('Token name').fill('ci');
      await page.getByRole('button', { name: 'Create token' }).click();
      const secret = await page.locator('#new-secret').inputValue();
      expect(secret.length).toBeGreaterThan(20);
      expect((await fetch(`${host.url}/v1/clusters`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200);
      await page.goto(`${host.url}/tenants/${t.body.id}`);
      expect(await page.locator('#new-secret').count()).toBe(0);
      await page.getByRole('button', { name: 'Revoke ci' }).click();
      await expect.poll(async () => (await fetch(`${host.url}/v1/clusters`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(401);
      await page.getByLabel('Provider', { exact: true }).selectOption('hetzner');
      await page.getByLabel(/^Variables/).fill('HCLOUD_TOKEN=very-secret-value');
      await page.getByRole('button', { name: 'Save credentials' }).click();
      await expect.poll(() => page.locator('#providers').textContent()).toContain('HCLOUD_TOKEN');
      expect(await page.content()).not.toContain('very-secret-value');
      await page.getByRole('button', { name: 'Create or rotate the webhook secret' }).click();
      expect((await page.locator('#new-secret').inputValue()).length).toBeGreaterThan(20);
      expect(await overflow(page)).toBeLessThanOrEqual(0);
      await shot(page, `${size}-tenant`);

      // The audit log, filtered by action.
      await page.getByRole('link', { name: 'Audit' }).click();
      await page.getByLabel('Action contains').fill('cluster.delete');
      await page.getByRole('button', { name: 'Filter' }).click();
      const actions = await page.locator('#audit td[data-label="Action"]').allTextContents();
      expect(actions.length).toBeGreaterThan(0);
      expect(actions.every((a) => a.includes('cluster.delete'))).toBe(true);
      expect(await overflow(page)).toBeLessThanOrEqual(0);
      await shot(page, `${size}-audit`);

      // A backup, listed on the backups page with its file name and size.
      await page.getByRole('link', { name: 'Runs' }).click();
      await page.getByRole('button', { name: 'Start backup' }).click();
      await expect.poll(() => page.locator('#run-state').textContent(), { timeout: 20_000 }).toBe('succeeded');
      await page.getByRole('link', { name: 'Backups' }).click();
      const fileName = (await page.locator('#backups td[data-label="File"]').first().textContent())!;
      expect(fileName).toMatch(/^rezus-.+\.db$/);
      expect(await page.locator('#backups td[data-label="Size"]').first().textContent()).toMatch(/^\d+(\.\d)? (KiB|MiB)$/);
      // The download is the database file itself (SQLite's magic header), through the session.
      const download = await context.request.get(`${host.url}/backups/${fileName}`);
      expect(download.status()).toBe(200);
      expect(download.headers()['content-disposition']).toBe(`attachment; filename="${fileName}"`);
      expect((await download.body()).subarray(0, 16).toString('latin1')).toBe('SQLite format 3\0');
      // The API: admin-only, names only from the backups directory.
      const listed = await api('GET', '/v1/backups');
      expect(listed.body.backups.map((b: { name: string }) => b.name)).toContain(fileName);
      expect((await api('GET', '/v1/backups/..%2Fmaster.key')).status).toBe(404);
      expect((await api('GET', '/v1/backups/rezus-nope.db')).status).toBe(404);
      await shot(page, `${size}-backups`);
      // Deleted from its row: gone from the page and the API.
      await page.locator('#backups tr', { hasText: fileName }).getByRole('button', { name: 'Delete' }).click();
      await expect.poll(() => page.locator('#backups td[data-label="File"]', { hasText: fileName }).count()).toBe(0);
      expect((await api('GET', '/v1/backups')).body.backups.map((b: { name: string }) => b.name)).not.toContain(fileName);
      expect(await overflow(page)).toBeLessThanOrEqual(0);
    } finally {
      await context.close();
    }
  }, 90_000);

  it('an unknown page is a friendly 404 for people and JSON for the API', async () => {
    const { context, page } = await signedIn(size);
    try {
      const res = await page.goto(`${host.url}/no/such/page`);
      expect(res!.status()).toBe(404);
      expect(await page.locator('h1').textContent()).toBe('Page not found');
      expect(await page.getByRole('link', { name: 'Clusters' }).count()).toBeGreaterThan(0);
      const missingRun = await page.goto(`${host.url}/runs/run_aaaaaaaaaaaaaaaaaaaaaaaaaa`);
      expect(missingRun!.status()).toBe(404);
      expect(await page.locator('#not-found').textContent()).toContain('This run does not exist');
      await shot(page, `${size}-404`);
      const apiRes = await api('GET', '/v1/no-such-route');
      expect(apiRes.status).toBe(404);
      expect(apiRes.body).toEqual({ error: { code: 'not_found', message: 'no such route' } });
      const plain = await fetch(`${host.url}/no/such/page`);
      expect(plain.status).toBe(404);
      expect(plain.headers.get('content-type')).toContain('application/json');
    } finally {
      await context.close();
    }
  });
});

/**
 * A provision run that failed after `count` events, written straight to the database: the
 * runner's worker must not pick it up. Event n says "tofu line n", except one carrying markup
 * (`markupAt`), tofu's diagnostic just before the end, and the failure itself, last.
 */
async function failedLongRun(count: number, markupAt: number): Promise<string> {
  const id = newId('run');
  const t0 = Date.now() - 600_000;
  await host.deps.db.insert(runs).values({
    id, kind: 'provision', tenantId, clusterId, exclusive: false, state: 'failed', params: { mode: 'apply' },
    error: 'terraform apply failed (exit 1)', attempt: 1, createdBy: 'env-admin', createdAt: t0, startedAt: t0, finishedAt: t0 + count,
  });
  const event = (seq: number) => {
    const base = { runId: id, seq, at: t0 + seq, level: 'info' as const, type: 'tofu.log', message: `tofu line ${seq}`, data: null };
    if (seq === markupAt) return { ...base, message: '<img src=x onerror="window.pwned=1">' };
    if (seq === count - 1) return { ...base, level: 'error' as const, type: 'tofu.diagnostic', message: 'Error: creating server: quota exceeded', data: { severity: 'error', summary: 'quota exceeded' } };
    if (seq === count) return { ...base, level: 'error' as const, type: 'failed', message: 'run failed: terraform apply failed (exit 1)' };
    return base;
  };
  for (let from = 1; from <= count; from += 500) {
    await host.deps.db.insert(runEvents).values(Array.from({ length: Math.min(500, count - from + 1) }, (_, i) => event(from + i)));
  }
  return id;
}

describe.each(['desktop', 'phone'] as const)('a failed run with a long log (%s)', (size) => {
  it('opens on the error at the end, counts what is shown, and loads the rest on request', async () => {
    const runId = await failedLongRun(3200, 1100);
    const { context, page } = await signedIn(size);
    try {
      await page.goto(`${host.url}/runs/${runId}`);
      const log = page.locator('#run-log');
      const count = page.locator('#log-count');
      expect(await count.textContent()).toBe('Showing 2,000 of 3,200 events.');
      // The last event is the failure, and the log box opens scrolled to it.
      const last = log.locator('li[data-seq]').last();
      expect(await last.locator('.msg').textContent()).toBe('run failed: terraform apply failed (exit 1)');
      await expect.poll(() => log.evaluate((el) => Math.ceil(el.scrollTop + el.clientHeight) >= el.scrollHeight)).toBe(true);
      const lastBox = (await last.boundingBox())!;
      const logBox = (await log.boundingBox())!;
      expect(lastBox.y).toBeGreaterThanOrEqual(logBox.y);
      expect(lastBox.y + lastBox.height).toBeLessThanOrEqual(logBox.y + logBox.height + 1);
      expect(await page.locator('#run-error').textContent()).toBe('quota exceeded');
      expect(await overflow(page)).toBeLessThanOrEqual(0);
      await shot(page, `${size}-long-log`);

      // Between the first and last pages: 1,200 events, a page of them earlier first, then the rest.
      expect(await page.locator('#log-gap-text').textContent()).toBe('1,200 events not shown.');
      await page.getByRole('button', { name: 'Show 1,000 earlier' }).click();
      await expect.poll(() => count.textContent()).toBe('Showing 3,000 of 3,200 events.');
      expect(await page.locator('#log-gap-text').textContent()).toBe('200 events not shown.');
      await page.locator('#log-gap').scrollIntoViewIfNeeded();
      expect(await overflow(page)).toBeLessThanOrEqual(0);
      await shot(page, `${size}-long-log-gap`);
      await page.getByRole('button', { name: 'Show 200 more' }).click();
      await expect.poll(() => count.textContent()).toBe('Showing all 3,200 events.');
      expect(await page.locator('#log-gap').count()).toBe(0);
      const seqs = await log.locator('li').evaluateAll((lis) => lis.map((li) => Number(li.getAttribute('data-seq'))));
      expect(seqs).toEqual(Array.from({ length: 3200 }, (_, i) => i + 1));
      expect(await log.locator('li[data-seq="1500"] .msg').textContent()).toBe('tofu line 1500');
      // An event's markup, loaded by the script, is text.
      expect(await log.locator('li[data-seq="1100"] .msg').textContent()).toBe('<img src=x onerror="window.pwned=1">');
      expect(await log.locator('img').count()).toBe(0);
      expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined();
    } finally {
      await context.close();
    }
  }, 60_000);
});

describe('machine charts and every page at phone width', () => {
  it('draws CPU, memory, load, disk and etcd charts with axes and units over a chosen window', async () => {
    sims = await startSimCluster(http(), {
      tenant: 'sims',
      cluster: 'edge',
      machines: [{ name: 'cp1', role: 'controlplane' }],
    });
    const simClusterId = sims.clusterId;
    for (let i = 0; i < 3; i++) expect((await collectPass(http(), simClusterId)).state).toBe('succeeded');
    const machineId = sims.machines.cp1!.id;
    for (const size of ['desktop', 'phone'] as const) {
      const { context, page } = await signedIn(size);
      try {
        await page.goto(`${host.url}/clusters/${sims.clusterId}`);
        expect(await page.locator(`#health-${machineId}`).textContent()).toBe('healthy');
        expect(await page.locator('a.usage').first().textContent()).toMatch(/mem \d+(\.\d)? [KMGT]?i?B/);
        await page.locator('a.usage').first().click();
        await page.getByRole('link', { name: '1 hour' }).click();
        await page.waitForURL(/window=1h$/);
        expect(await page.locator('.chip[aria-current="true"]').textContent()).toBe('1 hour');
        const charts = page.locator('svg.chart');
        expect(await charts.count()).toBe(5);
        const memory = page.locator('#chart-memory-used_bytes svg');
        expect(await memory.getAttribute('aria-label')).toMatch(/^Memory in use: latest \d+(\.\d)? [KMG]iB, min .+, max .+$/);
        // Axes: value ticks carry units, time ticks are clock times.
        const ticks = await memory.locator('text.tick').allTextContents();
        expect(ticks.some((t) => /[KMG]iB$/.test(t))).toBe(true);
        expect(ticks.filter((t) => /^\d\d:\d\d$/.test(t)).length).toBe(5);
        expect(await memory.locator('polyline.line').count()).toBe(1);
        expect(await page.locator('#chart-etcd-db_size_bytes svg').getAttribute('aria-label')).toMatch(/^etcd database size: (latest|no samples)/);
        expect(await overflow(page)).toBeLessThanOrEqual(0);
        await shot(page, `${size}-machine`);

        if (size === 'phone') {
          // No page is wider than a phone.
          const cl = (await api('GET', '/v1/clusters')).body.clusters as Array<{ id: string }>;
          const t = (await api('GET', '/v1/tenants')).body.tenants as Array<{ id: string }>;
          const runs = (await api('GET', '/v1/runs?limit=5')).body.runs as Array<{ id: string }>;
          const paths = ['/', '/runs', '/runs?collect=show', '/tenants', `/tenants/${t[0]!.id}`, '/audit', '/backups', '/api', ...cl.map((x) => `/clusters/${x.id}`), `/runs/${runs[0]!.id}`, '/nope'];
          for (const p of paths) {
            await page.goto(host.url + p);
            expect(await overflow(page), p).toBeLessThanOrEqual(0);
          }
          await page.goto(`${host.url}/clusters/${sims.clusterId}`);
          await shot(page, 'phone-cluster-cards');
        }
      } finally {
        await context.close();
      }
    }
  }, 90_000);
});
