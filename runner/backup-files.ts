import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { BACKUP_NAME, type BackupFile, type BackupFiles } from '../functions/backup/files.ts';

/** Backups as the backup executor writes them: `<dataDir>/backups/rezus-*.db` (partial copies excluded). */
export function nodeBackupFiles(dir: string): BackupFiles {
  const describe = async (name: string): Promise<BackupFile | null> => {
    const s = await stat(join(dir, name)).catch(() => null);
    return s?.isFile() ? { name, bytes: s.size, modifiedAt: Math.round(s.mtimeMs) } : null;
  };
  return {
    async list() {
      const names = await readdir(dir).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return [] as string[];
        throw err;
      });
      const files = await Promise.all(names.filter((n) => BACKUP_NAME.test(n)).map(describe));
      return files.filter((f): f is BackupFile => f !== null).sort((a, b) => b.modifiedAt - a.modifiedAt || b.name.localeCompare(a.name));
    },
    async open(name) {
      if (!BACKUP_NAME.test(name)) return null;
      const file = await describe(name);
      if (!file) return null;
      return { file, body: Readable.toWeb(createReadStream(join(dir, name))) as ReadableStream<Uint8Array> };
    },
  };
}
