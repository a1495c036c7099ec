import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseKey32 } from './key-text.ts';

/** Parses a master key given as 64 hex characters or base64 of 32 bytes. */
export const parseMasterKey = (text: string): Buffer => parseKey32(text, 'REZUS_MASTER_KEY');

/**
 * The key from the environment, else the one in `<dataDir>/master.key`, created 0600 on first
 * start. Created with O_EXCL so two runners starting at once cannot each write a different key.
 */
export async function loadMasterKey(dataDir: string, fromEnv: string | undefined): Promise<Buffer> {
  if (fromEnv) return parseMasterKey(fromEnv);
  const path = join(dataDir, 'master.key');
  await mkdir(dataDir, { recursive: true });
  try {
    const fh = await open(path, 'wx', 0o600);
    try {
      const key = randomBytes(32);
      await fh.writeFile(key.toString('base64') + '\n');
      return key;
    } finally {
      await fh.close();
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return parseMasterKey(await readFile(path, 'utf8'));
  }
}
