import { z } from 'zod';
import { defineJob } from '../../lib/jobs/spec.ts';

/** A consistent copy of the embedded database (runner/jobs/backup). */
export const backupJob = defineJob('backup', z.strictObject({}));
