import { createHash, randomUUID } from 'node:crypto';
import type { Harness } from './harness.ts';

/** A tofu-shaped state document; only lineage and serial matter to the backend. */
export function stateDoc(lineage: string, serial: number, extra: Record<string, unknown> = {}) {
  return JSON.stringify({ version: 4, terraform_version: '1.11.4', serial, lineage, outputs: {}, resources: [], check_results: null, ...extra });
}

/** A LockInfo document as tofu sends it (Go field names). */
export function lockInfo(who = 'ci@runner', id: string = randomUUID()) {
  return { ID: id, Operation: 'OperationTypeApply', Info: '', Who: who, Version: '1.11.4', Created: new Date().toISOString(), Path: '' };
}

export const basic = (cred: { username: string; password: string }) =>
  `Basic ${Buffer.from(`${cred.username}:${cred.password}`).toString('base64')}`;

export const md5 = (body: string | Uint8Array) => createHash('md5').update(body).digest('base64');

/** Speaks the http backend protocol to the in-process app, the way tofu would. */
export function stateClient(h: Harness, tenantId: string, clusterId: string, auth: string) {
  const path = `/v1/state/${tenantId}/${clusterId}`;
  const send = async (method: string, opts: { query?: string; body?: string; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { authorization: auth, ...opts.headers };
    if (opts.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      headers['content-md5'] ??= md5(opts.body);
    }
    const res = await h.app.request(path + (opts.query ?? ''), { method, headers, body: opts.body });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      /* keep text */
    }
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    return { status: res.status, text, json: json as any, headers: res.headers };
  };
  return {
    path,
    get: (query = '') => send('GET', { query }),
    post: (body: string, query = '', headers?: Record<string, string>) => send('POST', { body, query, headers }),
    del: (query = '') => send('DELETE', { query }),
    lock: (info: object) => send('LOCK', { body: JSON.stringify(info) }),
    unlock: (info: object) => send('UNLOCK', { body: JSON.stringify(info) }),
  };
}
