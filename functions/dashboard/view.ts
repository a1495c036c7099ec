import type { Principal } from '../context.ts';

/** What every page needs to render links and forms for this request. */
export interface View {
  /** Prefix of every URL the page emits: the ingress path, or ''. */
  base: string;
  csrf: string;
  principal: Principal | null;
  /** Signed in by Home Assistant ingress: no login, no logout. */
  ingress: boolean;
}

export const href = (v: View, path: string) => `${v.base}${path}`;

export function formatTime(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return new Date(ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
}

/** A form field the user filled in, or omitted when left blank, so optional API fields stay optional. */
export type FormValues = Record<string, string>;
