// Server-side apply and the reads and deletes around it, for one object at a known path
// (lib/kube/discovery.ts). The server merges and owns the result; this side only says who applies
// (the field manager) and whether fields another manager set may be taken over (force).
import { endpoint, expectOk, getIfExists, type KubeWriter } from './drain.ts';
import { httpError, KubeApiError } from './errors.ts';
import type { KubeObject } from './object-ref.ts';

/** What the server holds: the object with its metadata (resourceVersion, generation, annotations). */
export type StoredObject = KubeObject & { metadata: KubeObject['metadata'] & { resourceVersion?: string; generation?: number } };

export async function getObject(w: KubeWriter, path: string, signal: AbortSignal): Promise<StoredObject | undefined> {
  return (await getIfExists(w, path, signal)) as StoredObject | undefined;
}

export interface ApplyOptions {
  fieldManager: string;
  /** Take over fields another manager set (talosctl's sync does: Talos's objects are Talos's). */
  force: boolean;
  /** The server validates and answers the would-be result, and stores nothing. */
  dryRun?: boolean;
  signal: AbortSignal;
}

/** Applies `obj` (as JSON, which the apply-patch YAML media type accepts); the server's result. */
export async function applyObject(w: KubeWriter, path: string, obj: KubeObject, opts: ApplyOptions): Promise<StoredObject> {
  const query = new URLSearchParams({ fieldManager: opts.fieldManager, force: String(opts.force) });
  if (opts.dryRun) query.set('dryRun', 'All');
  const body = await expectOk(w, 'PATCH', `${path}?${query}`, { body: obj, contentType: 'application/apply-patch+yaml', signal: opts.signal });
  if (!body || typeof body !== 'object') throw new KubeApiError('http', `${endpoint(w, 'PATCH', path)}: the server answered no object`);
  return body as StoredObject;
}

/** Creates `obj` in the collection at `collectionPath`; false when one of its name already exists (409). */
export async function createObject(w: KubeWriter, collectionPath: string, obj: KubeObject, opts: { fieldManager: string; signal: AbortSignal }): Promise<boolean> {
  const r = await w.request('POST', `${collectionPath}?${new URLSearchParams({ fieldManager: opts.fieldManager })}`, { body: obj, signal: opts.signal });
  if (r.status === 409) return false;
  if (r.status < 200 || r.status > 299) throw httpError(endpoint(w, 'POST', collectionPath), r.status, r.body, r.retryAfterMs);
  return true;
}

/** A JSON merge patch (RFC 7386: `null` removes a key), whoever owns the fields it touches. */
export async function mergePatchObject(w: KubeWriter, path: string, patch: Record<string, unknown>, opts: { fieldManager: string; signal: AbortSignal }): Promise<void> {
  await expectOk(w, 'PATCH', `${path}?${new URLSearchParams({ fieldManager: opts.fieldManager })}`, { body: patch, contentType: 'application/merge-patch+json', signal: opts.signal });
}

/** Deletes with background propagation (dependents go after); false when it was already gone. */
export async function deleteObject(w: KubeWriter, path: string, signal: AbortSignal): Promise<boolean> {
  const r = await w.request('DELETE', `${path}?propagationPolicy=Background`, { signal });
  if (r.status === 404) return false;
  if (r.status < 200 || r.status > 299) throw httpError(endpoint(w, 'DELETE', path), r.status, r.body, r.retryAfterMs);
  return true;
}
