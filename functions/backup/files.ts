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
  /** false when there is no such backup. */
  remove(name: string): Promise<boolean>;
  /**
   * Bytes a backup may still take on the file system the backups are written to. Here, not in the
   * backup run, so that a host (or a test) decides how it is measured.
   */
  freeBytes(): Promise<number>;
}

/** The names backup runs write: nothing with a path separator or a leading dot gets through. */
export const BACKUP_NAME = /^rezus-[A-Za-z0-9_-]+\.db$/;

/**
 * Backup files kept when the host sets no count (REZUS_BACKUP_KEEP). Here, not beside the job's
 * spec: the runner's start imports the backup executor's module, and the spec brings zod along.
 */
export const DEFAULT_BACKUP_KEEP = 7;
