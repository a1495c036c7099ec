import { EVENTS_PAGE_MAX } from '../runs/routes.ts';
import type { ApiClient, Json } from './api.ts';
import { TERMINAL } from './run-view.ts';

/** The events a run page opens with. */
export interface RunLog {
  /** From the first event on: one API page. */
  head: Json[];
  /** The last page of a finished run that has more than one; it follows `head`, maybe after a gap. */
  tail: Json[];
  /** Every event of a finished run; null while the run is live (its stream brings the rest) or unknown. */
  total: number | null;
}

/**
 * Reads the first page of a run's log (`first`, the API's answer) and, for a finished run with
 * more, the last page: a long log's error is at its end. A run's seqs run 1..n without gaps (the
 * queue numbers them so), so the API's `last` is the count too.
 */
export async function readRunLog(client: ApiClient, first: Json): Promise<RunLog> {
  const head: Json[] = first.events;
  if (!TERMINAL.has(first.run.state)) return { head, tail: [], total: null };
  const total = Number(first.last);
  if (!first.more) return { head, tail: [], total };
  const headLast = Number(head.at(-1).seq);
  const res = await client.get(`/v1/runs/${encodeURIComponent(first.run.id)}/events?after=${Math.max(headLast, total - EVENTS_PAGE_MAX)}&limit=${EVENTS_PAGE_MAX}`);
  // A run deleted meanwhile, or any refusal: the first page still reads as it did before paging.
  if (!res.ok) return { head, tail: [], total: null };
  return { head, tail: res.body.events, total };
}
