import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clusters } from '../db/schema/index.ts';
import { loadMasterKey, parseMasterKey } from '../lib/crypto/master-key.ts';
import { createSealer } from '../lib/crypto/seal.ts';
import { createHarness, seedCluster } from './support/harness.ts';
import { eq } from 'drizzle-orm';

describe('sealing', () => {
  const sealer = createSealer(randomBytes(32));

  it('round-trips and never repeats ciphertext', () => {
    const a = sealer.seal('top secret', 'ctx');
    const b = sealer.seal('top secret', 'ctx');
    expect(a).not.toBe(b);
    expect(a).not.toContain('top secret');
    expect(sealer.openText(a, 'ctx')).toBe('top secret');
  });

  it('refuses another context, another key, or a flipped bit', () => {
    const sealed = sealer.seal('value', 'cluster:a');
    expect(() => sealer.open(sealed, 'cluster:b')).toThrow(/does not open/);
    expect(() => createSealer(randomBytes(32)).open(sealed, 'cluster:a')).toThrow(/does not open/);
    const raw = Buffer.from(sealed.slice(3), 'base64');
    raw[raw.length - 1]! ^= 1;
    expect(() => sealer.open(`v1:${raw.toString('base64')}`, 'cluster:a')).toThrow(/does not open/);
  });

  it('does not put the secret into the error message', () => {
    try {
      sealer.open('v1:' + Buffer.alloc(40).toString('base64'), 'x');
    } catch (err) {
      expect(String(err)).not.toMatch(/[A-Za-z0-9+/]{40}/);
    }
  });
});

describe('master key', () => {
  it('creates the key file once with mode 0600 and reuses it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rezus-key-'));
    try {
      const k1 = await loadMasterKey(dir, undefined);
      const k2 = await loadMasterKey(dir, undefined);
      expect(k1.equals(k2)).toBe(true);
      expect((await stat(join(dir, 'master.key'))).mode & 0o777).toBe(0o600);
      const fromEnv = await loadMasterKey(dir, randomBytes(32).toString('hex'));
      expect(fromEnv.equals(k1)).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('rejects keys of the wrong size', async () => {
    expect(() => parseMasterKey('abcd')).toThrow(/32 bytes/);
    const dir = await mkdtemp(join(tmpdir(), 'rezus-key-'));
    await writeFile(join(dir, 'master.key'), 'short');
    await expect(loadMasterKey(dir, undefined)).rejects.toThrow(/32 bytes/);
    await rm(dir, { recursive: true, force: true });
  });
});

describe('secrets at rest', () => {
  it('leaves no plaintext of a stored secret in the database file', async () => {
    const h = await createHarness();
    try {
      const { clusterId } = await seedCluster(h);
      const marker = 'PLAINTEXT-MARKER-' + randomBytes(8).toString('hex');
      await h.deps.db
        .update(clusters)
        .set({ secretsSealed: h.deps.sealer.seal(marker, `cluster:${clusterId}:secrets`) })
        .where(eq(clusters.id, clusterId));
      await h.deps.database.client.execute('PRAGMA wal_checkpoint(TRUNCATE)');
      const files = [h.dbFile, `${h.dbFile}-wal`];
      for (const f of files) {
        const bytes = await readFile(f).catch(() => Buffer.alloc(0));
        expect(bytes.includes(Buffer.from(marker)), f).toBe(false);
      }
      const row = await h.deps.db.select().from(clusters).where(eq(clusters.id, clusterId)).get();
      expect(h.deps.sealer.openText(row!.secretsSealed!, `cluster:${clusterId}:secrets`)).toBe(marker);
    } finally {
      await h.close();
    }
  });
});
