import { readFile } from 'node:fs/promises';
import { errorMessage } from '../lib/errors.ts';
import { addonOptionsToEnv } from './addon-options.ts';

// The Supervisor writes the user's options here before every start.
const OPTIONS_FILE = process.env.REZUS_ADDON_OPTIONS ?? '/data/options.json';

async function readOptions(): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(OPTIONS_FILE, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new Error(`cannot read ${OPTIONS_FILE}: ${(err as Error).message}`, { cause: err });
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`${OPTIONS_FILE} is not valid JSON`);
  }
}

try {
  Object.assign(process.env, addonOptionsToEnv(await readOptions()));
} catch (err) {
  console.error(errorMessage(err));
  process.exit(2);
}
// The runner reads its configuration from the environment set above.
await import('./main.ts');
