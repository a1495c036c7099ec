// The runner's start loads only what serving the API needs: the libraries that only a job or a
// first cluster needs are in chunks imported on first use. Read from the bundle's metafile
// (dist/meta.json, written by scripts/build.mjs; vitest's globalSetup builds dist/).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';

interface Output {
  entryPoint?: string;
  imports: { path: string; kind: string; external?: boolean }[];
  inputs: Record<string, unknown>;
}
interface Meta {
  outputs: Record<string, Output>;
}

const ROOT = join(import.meta.dirname, '..');
// Imported with `await import()` by every start, so they count as loaded at start.
const ALWAYS_IMPORTED = new Set(['runner/launch.ts', 'runner/host.ts']);
// zod: the config is read by hand and the job specs load with their first run (runner/jobs/registry.ts);
// croner: the schedule starts with the warm-up (runner/host.ts).
const LAZY = ['@grpc/proto-loader', 'protobufjs', 'ws', '@libsql/hrana-client', 'execa', 'zod', 'croner'];
// Kubernetes is spoken over node:https by lib/kube/http.ts, gRPC over node:http2 by
// lib/talos/api/node-channel.ts, and certificates are DER built by lib/talos/x509-*.ts; none of
// these libraries must come back (grpc-js serves the simulators only).
const GONE = ['@kubernetes/client-node', '@grpc/grpc-js', '@peculiar/x509', 'asn1js'];

const packageOf = (input: string): string | undefined => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1];

/** The output files a start loads, from an entry: static imports, plus the dynamic ones every start takes. */
function loadedAtStart(meta: Meta, entry: string): Set<string> {
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const im of meta.outputs[file]?.imports ?? []) {
      if (im.external) continue;
      const target = meta.outputs[im.path];
      if (im.kind === 'import-statement' || (im.kind === 'dynamic-import' && target?.entryPoint && ALWAYS_IMPORTED.has(target.entryPoint))) queue.push(im.path);
    }
  }
  return seen;
}

function packagesIn(meta: Meta, files: Iterable<string>): Set<string> {
  const found = new Set<string>();
  for (const f of files) for (const input of Object.keys(meta.outputs[f]?.inputs ?? {})) {
    const p = packageOf(input);
    if (p) found.add(p);
  }
  return found;
}

describe('the runner bundle', () => {
  let meta: Meta;
  beforeAll(async () => {
    meta = JSON.parse(await readFile(join(ROOT, 'dist', 'meta.json'), 'utf8')) as Meta;
  });

  it('keeps gRPC, execa, zod, croner and the remote database clients out of the start, and no Kubernetes client, grpc-js or x509 library anywhere', () => {
    const start = loadedAtStart(meta, 'dist/runner/main.js');
    // The walk reached the host (so the check covers the whole start), which serves the API.
    expect([...start].some((f) => meta.outputs[f]?.entryPoint === 'runner/host.ts')).toBe(true);
    const atStart = packagesIn(meta, start);
    expect(atStart.has('hono')).toBe(true);
    expect(atStart.has('drizzle-orm')).toBe(true);
    for (const p of LAZY) expect(atStart.has(p), `${p} loads at start`).toBe(false);
    // …and they are in the bundle, loaded by the chunks that need them.
    const everywhere = packagesIn(meta, Object.keys(meta.outputs));
    for (const p of LAZY) expect(everywhere.has(p), `${p} is not bundled at all`).toBe(true);
    for (const p of GONE) expect(everywhere.has(p), `${p} is bundled`).toBe(false);
  });

  it('starts with the probes only: route modules, the dashboard, the OpenAPI document and prom-client load after the start', () => {
    const start = loadedAtStart(meta, 'dist/runner/main.js');
    const inputs = new Set([...start].flatMap((f) => Object.keys(meta.outputs[f]?.inputs ?? {})));
    expect(inputs.has('functions/ops/routes.ts')).toBe(true);
    for (const lazy of ['functions/mount-routes.ts', 'functions/dashboard/routes.tsx', 'functions/openapi/document.ts', 'functions/inventory/clusters.ts', 'runner/metrics.ts']) {
      expect(inputs.has(lazy), `${lazy} loads at start`).toBe(false);
    }
    expect(packagesIn(meta, start).has('prom-client')).toBe(false);
  });

  it('ships each entry the add-on image and the package bin name', async () => {
    for (const entry of ['dist/runner/main.js', 'dist/runner/addon-main.js', 'dist/cli/main.js']) expect(meta.outputs[entry], entry).toBeDefined();
    expect((await readFile(join(ROOT, 'dist', 'cli', 'main.js'), 'utf8')).startsWith('#!/usr/bin/env node\n')).toBe(true);
  });
});
