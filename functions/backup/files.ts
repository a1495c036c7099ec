/**
 * The backup files a host keeps. Reading them is file-system work, so the runner provides it
 * (runner/backup-files.ts); a host without one answers that it keeps no backups.
 */
export interface BackupFile {
  name: string;
  bytes: number;
  modifiedAt: number;
}

export interface BackupFiles {
  /** Newest first. */
  list(): Promise<BackupFile[]>;
  /** null when there is no such backup. */
  open(name: string): Promise<{ file: BackupFile; body: ReadableStream<Uint8Array> } | null>;
}

/** The names backup runs write: nothing with a path separator or a leading dot gets through. */
export const BACKUP_NAME = /^rezus-[A-Za-z0-9_-]+\.db$/;
