import { createReadStream } from 'node:fs';
import { readdir, stat, statfs, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
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
    async remove(name) {
      if (!BACKUP_NAME.test(name) || !(await describe(name))) return false;
      try {
        await unlink(join(dir, name));
        return true;
      } catch (err) {
        // Gone between the look and the unlink (another delete, a prune): as absent as never there.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
        throw err;
      }
    },
    async freeBytes() {
      // Before the first backup the directory does not exist yet; the file system it will be on is
      // that of its nearest existing ancestor (a statfs of the missing path would fail, not say 0).
      for (let at = dir; ; at = dirname(at)) {
        try {
          const fs = await statfs(at);
          // bavail, not bfree: the blocks reserved for root are the system's last room to recover
          // in (Home Assistant's, on the add-on's disk), not room for a backup, even when running as root.
          return fs.bavail * fs.bsize;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || dirname(at) === at) throw err;
        }
      }
    },
  };
}
