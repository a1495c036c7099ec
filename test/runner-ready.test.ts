// What the start leaves for after the first /readyz (runner/host.ts): the schedule starts with the
// warm-up, and run kinds load their spec and executor with their first run. Both in the built
// runner, where a chunk missing from the bundle would show.
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cleanUpAfterEach, startRunner, until } from './support/runner-process.ts';

const { children, dirs } = cleanUpAfterEach();

interface PublicRun {
  id: string;
  kind: string;
  state: string;
  createdBy: string | null;
}

describe('runner start', () => {
  it('starts the schedule after the warm-up: a scheduled pass is queued, and its kind loads its spec and executor to run it to the end', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'rezus-ready-'));
    dirs.push(dataDir);
    const token = 'ready-test-admin-token-0123456789abcdef';
    // Every second (croner's six-field form), so the first tick follows the warm-up closely.
    const r = await startRunner({ REZUS_DATA_DIR: dataDir, REZUS_PORT: '0', REZUS_HOST: '127.0.0.1', REZUS_ADMIN_TOKEN: token, REZUS_COLLECT_CRON: '* * * * * *' });
    children.push(r.child);
    expect((await fetch(`${r.url}/readyz`)).status).toBe(200);
    const auth = { authorization: `Bearer ${token}` };
    const passes = async () => ((await (await fetch(`${r.url}/v1/runs`, { headers: auth })).json()) as { runs: PublicRun[] }).runs.filter((x) => x.kind === 'collect');
    const done = await until(
      async () => (await passes()).find((x) => x.createdBy === 'cron' && x.state === 'succeeded'),
      'a scheduled collect pass that succeeded',
      15_000,
    );
    expect(done.kind).toBe('collect');
    expect(r.output()).not.toMatch(/"level":"error"/);
  });
});
