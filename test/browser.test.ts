import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusters } from '../db/schema/index.ts';
import { backupExecutor } from '../runner/jobs/backup/executor.ts';
import type { AppExecutors } from '../runner/jobs/registry.ts';
import { loadConfig } from '../runner/config.ts';
import { startHost, type Host } from '../runner/host.ts';
import { startIngressProxy } from './support/ingress-proxy.ts';
import { executors as allExecutors } from '../runner/jobs/registry.ts';
import { collectPass, startSimCluster } from './support/collect-fleet.ts';
import { httpApi } from './support/harness.ts';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, 'screenshots');
const ADMIN = 'browser-admin-token-' + 'x'.repeat(16);
const INGRESS = '/api/hassio_ingress/b7Qz_browser-test';

let host: Host;
let dataDir: string;
const profiles: string[] = [];
let proxy: Awaited<ReturnType<typeof startIngressProxy>>;

/** Backups wait here until the test has seen the run page connect to the live stream. */
const held: Array<() => void> = [];
const executors: AppExecutors = {
  ...allExecutors(),
  backup: async (ctx) => {
    await ctx.emit({ type: 'backup.wait', message: 'waiting for the test to release the backup' });
    await new Promise<void>((resolve) => held.push(resolve));
    return backupExecutor(ctx, {});
  },
};

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`browser tests need Chromium at ${CHROMIUM}: install it with "apt-get install -y chromium"`);
  }
  await mkdir(SHOTS, { recursive: true });
  dataDir = await mkdtemp(join(tmpdir(), 'rezus-browser-'));
  const config = loadConfig({
    REZUS_DATA_DIR: dataDir,
    REZUS_HOST: '127.0.0.1',
    REZUS_PORT: '0',
    REZUS_ADMIN_TOKEN: ADMIN,
    REZUS_LOG_LEVEL: 'error',
    REZUS_TRUST_INGRESS: 'true',
    REZUS_SHUTDOWN_GRACE_S: '1',
  });
  // The stand-in Supervisor is on loopback, so loopback is the trusted peer here (production: 172.30.32.2).
  host = await startHost(config, () => {}, { app: { dashboard: { trustedIngressPeer: '127.0.0.1' } }, executors });
  proxy = await startIngressProxy(host.url, INGRESS);
}, 30_000);

afterAll(async () => {
  for (const release of held.splice(0)) release();
  await proxy?.close();
  await host?.stop();
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  for (const dir of profiles.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** Debian's Chromium, headless, with a fresh profile directory of its own. */
async function launch(options: BrowserContextOptions): Promise<BrowserContext> {
  const profile = await mkdtemp(join(tmpdir(), 'rezus-chromium-'));
  profiles.push(profile);
  return chromium.launchPersistentContext(profile, {
    ...options,
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

const shot = (page: Page, name: string) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

/** Creates a tenant, a cluster and a machine through the forms; returns the cluster page URL. */
async function createObjects(page: Page, base: string, names: { tenant: string; cluster: string; machine: string }) {
  await page.getByRole('link', { name: 'Tenants' }).click();
  await page.getByLabel('Name').fill(names.tenant);
  await page.getByRole('button', { name: 'Create tenant' }).click();
  await expect.poll(() => page.locator('table').textContent()).toContain(names.tenant);

  await page.getByRole('link', { name: 'Clusters' }).click();
  await page.getByLabel('Tenant').selectOption({ label: names.tenant });
  await page.getByLabel('Name').fill(names.cluster);
  await page.getByLabel('Talos version').fill('v1.13.9');
  await page.getByLabel('Kubernetes version').fill('1.36.3');
  await page.getByLabel('API endpoint').fill('https://[2001:db8::1]:6443');
  await page.getByRole('button', { name: 'Create cluster' }).click();
  await page.waitForURL(new RegExp(`^${base}/clusters/cl_`));
  expect(await page.locator('h1').textContent()).toBe(`Cluster ${names.cluster}`);
  const clusterUrl = page.url();

  await page.getByLabel(/^Name/).fill(names.machine);
  await page.getByLabel('Role').selectOption('controlplane');
  await page.getByLabel('Provider').selectOption('metal');
  await page.getByLabel(/^Address/).fill('[2001:db8::10]:50000');
  await page.getByRole('button', { name: 'Add machine' }).click();
  await expect.poll(() => page.locator('tbody').first().textContent()).toContain(names.machine);
  // The API's validation message shows on the page.
  await page.getByLabel(/^Name/).fill('Not_A_Label');
  await page.getByRole('button', { name: 'Add machine' }).click();
  expect(await page.locator('#m-name-error').textContent()).toMatch(/^must be a DNS label/);
  expect(await page.getByLabel(/^Name/).getAttribute('aria-invalid')).toBe('true');
  return clusterUrl;
}

/** Starts a backup from the runs page and follows its log on the run page to the end. */
async function backupAndFollow(page: Page, base: string) {
  await page.getByRole('link', { name: 'Runs' }).click();
  await page.getByRole('button', { name: 'Start backup' }).click();
  await page.waitForURL(new RegExp(`^${base}/runs/run_`));
  // The page is live before the run goes on.
  await expect.poll(() => page.locator('#run-live').textContent(), { timeout: 10_000 }).toBe('Following the run live.');
  await expect.poll(() => page.locator('#run-log').textContent()).toContain('waiting for the test to release the backup');
  await expect.poll(() => held.length).toBe(1);
  held.shift()!();
  await expect.poll(() => page.locator('#run-live').textContent(), { timeout: 10_000 }).toBe('Run finished: succeeded.');
  expect(await page.locator('#run-state').textContent()).toBe('succeeded');
  expect(await page.locator('#run-finished').textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  const log = await page.locator('#run-log li .msg').allTextContents();
  expect(log.at(-2)).toMatch(/^backup written \(\d+ bytes\)$/);
  expect(log.at(-1)).toBe('run succeeded');
  expect(await page.locator('#cancel-run').isHidden()).toBe(true);
}

describe('dashboard in a browser', () => {
  it('logs in, creates a tenant, a cluster and a machine, and follows a backup run live (desktop)', async () => {
    const context = await launch({ viewport: { width: 1280, height: 800 } });
    const page = context.pages()[0] ?? (await context.newPage());
    context.setDefaultTimeout(10_000);
    try {
      await page.goto(`${host.url}/`);
      await page.waitForURL(`${host.url}/login`);
      await shot(page, 'desktop-login');
      await page.getByLabel(/API token/).fill('wrong-token');
      await page.getByRole('button', { name: 'Log in' }).click();
      expect(await page.getByRole('alert').textContent()).toContain('That token is not valid.');
      await page.getByLabel(/API token/).fill(ADMIN);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.waitForURL(`${host.url}/`);
      const cookies = await context.cookies();
      expect(cookies.find((c) => c.name === 'rezus_session')).toMatchObject({ httpOnly: true, sameSite: 'Strict' });

      const clusterUrl = await createObjects(page, host.url, { tenant: 'home', cluster: 'lab', machine: 'cp-1' });
      await page.goto(clusterUrl);
      await shot(page, 'desktop-cluster');
      await page.getByRole('link', { name: 'Clusters' }).click();
      expect(await page.locator('tbody').textContent()).toContain('unknown');
      await shot(page, 'desktop-clusters');

      await backupAndFollow(page, host.url);
      await shot(page, 'desktop-run');

      await page.getByRole('button', { name: 'Log out' }).click();
      await page.waitForURL(`${host.url}/login`);
      await page.goto(`${host.url}/runs`);
      await page.waitForURL(`${host.url}/login`);
    } finally {
      await context.close();
    }
  });

  it('works under the Home Assistant ingress path without a login (phone width)', async () => {
    const context = await launch({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    const page = context.pages()[0] ?? (await context.newPage());
    context.setDefaultTimeout(10_000);
    const requested: string[] = [];
    page.on('request', (r) => requested.push(r.url()));
    try {
      await page.goto(`${proxy.url}/`);
      expect(await page.locator('h1').textContent()).toBe('Clusters');
      expect(await page.locator('.who').textContent()).toContain('Home Assistant (admin)');
      await createObjects(page, proxy.url, { tenant: 'ha-home', cluster: 'ha-lab', machine: 'ha-cp-1' });
      await shot(page, 'phone-cluster');
      await page.getByRole('link', { name: 'Clusters' }).click();
      await shot(page, 'phone-clusters');
      await backupAndFollow(page, proxy.url);
      await shot(page, 'phone-run');
      // Every request the pages made — documents, forms, CSS, script, the event stream — stayed under the ingress path.
      expect(requested.length).toBeGreaterThan(10);
      expect(requested.filter((u) => !u.startsWith(`${proxy.url}/`))).toEqual([]);
      expect(requested.some((u) => /\/runs\/run_[a-z2-7]+\/events\?after=\d+$/.test(u))).toBe(true);
      // The layout fits the phone: nothing wider than the viewport outside scrollable tables.
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      expect(overflow).toBeLessThanOrEqual(0);
    } finally {
      await context.close();
    }
  });

  it('shows a machine turn unreachable after a collect pass against a stopped node', async () => {
    // The collect fixture drives the API; here it goes over HTTP to the real runner.
    const api = httpApi(host.url, ADMIN, host.deps);
    const sims = await startSimCluster(api, { tenant: 'sims', cluster: 'edge', machines: [{ name: 'cp1', role: 'controlplane' }] });
    const collect = async () => expect((await collectPass(api, sims.clusterId)).state).toBe('succeeded');
    const context = await launch({ viewport: { width: 1280, height: 800 } });
    const page = context.pages()[0] ?? (await context.newPage());
    context.setDefaultTimeout(10_000);
    const machineId = sims.machines.cp1!.id;
    try {
      await collect();
      await page.goto(`${host.url}/login`);
      await page.getByLabel(/API token/).fill(ADMIN);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.goto(`${host.url}/clusters/${sims.clusterId}`);
      expect(await page.locator(`#health-${machineId}`).textContent()).toBe('healthy');

      await sims.machines.cp1!.sim!.stop();
      await collect();
      await page.reload();
      expect(await page.locator(`#health-${machineId}`).textContent()).toBe('unreachable');
      await shot(page, 'desktop-cluster-unreachable');

      // Once bootstrapped, the cluster offers the bootstrap-manifest sync and its preview.
      expect(await page.locator('#sync-manifests').count()).toBe(0);
      expect(await page.locator('#ce-k8s').evaluate((e) => e.tagName)).toBe('INPUT');
      await host.deps.db.update(clusters).set({ bootstrappedAt: Date.now() }).where(eq(clusters.id, sims.clusterId));
      await page.reload();
      expect(await page.getByRole('button', { name: 'Sync manifests' }).isVisible()).toBe(true);
      expect(await page.getByRole('button', { name: 'Preview manifest sync' }).isVisible()).toBe(true);
      // Its Kubernetes version is no longer a field (only the upgrade moves it); the edit form still saves.
      expect(await page.locator('#ce-k8s').evaluate((e) => e.tagName)).toBe('P');
      expect(await page.locator('#ce-k8s').textContent()).toContain('change it with Upgrade Kubernetes');
      await shot(page, 'desktop-cluster-bootstrapped');
      await page.getByRole('button', { name: 'Save changes' }).click();
      await page.waitForLoadState();
      expect(await page.locator('[role=alert]').count()).toBe(0);
      expect(new URL(page.url()).pathname).toBe(`/clusters/${sims.clusterId}`);
    } finally {
      await context.close();
      await sims.stop();
    }
  });
});
