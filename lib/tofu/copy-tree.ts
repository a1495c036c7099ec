import { copyFile, lstat, mkdir, readdir, readlink, symlink } from 'node:fs/promises';
import type { Dirent, Stats } from 'node:fs';
import path from 'node:path';

/**
 * Copies a directory tree of regular files, directories and symlinks, entries in parallel.
 * `fs.cp` stats every entry several times and costs tens of milliseconds even for a one-file
 * module on a busy machine; a provision run copies module trees and work-dir inits several times.
 * A relative symlink is re-pointed at the absolute path it resolved to (as `fs.cp` does), so links
 * into the shared plugin cache survive a copy to another depth. Directories are created owner-only;
 * files keep their mode.
 */
export async function copyTree(src: string, dest: string, keep: (name: string) => boolean = () => true): Promise<void> {
  await mkdir(dest, { recursive: true, mode: 0o700 });
  const entries = await readdir(src, { withFileTypes: true });
  await Promise.all(entries.filter((e) => keep(e.name)).map((e) => copyKind(e, path.join(src, e.name), path.join(dest, e.name), keep)));
}

/** Copies one file, symlink or directory tree. */
export async function copyEntry(from: string, to: string): Promise<void> {
  await copyKind(await lstat(from), from, to, () => true);
}

async function copyKind(kind: Dirent | Stats, from: string, to: string, keep: (name: string) => boolean): Promise<void> {
  if (kind.isDirectory()) return copyTree(from, to, keep);
  if (kind.isSymbolicLink()) {
    const target = await readlink(from);
    return symlink(path.isAbsolute(target) ? target : path.resolve(path.dirname(from), target), to);
  }
  if (kind.isFile()) return copyFile(from, to);
  // Sockets, fifos and devices have no place in a module or an init; they are skipped.
}
