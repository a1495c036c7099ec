import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { addonOptionsSchema } from '../runner/addon-options.ts';
import { aptInstalls, copySpecs, parseDockerfile, stages } from './support/dockerfile.ts';
import {
  addonConfigSchema,
  optionProblems,
  problems,
  repositorySchema,
  SCHEMA_ELEMENT,
  translationProblems,
  translationsSchema,
  type AddonConfig,
} from './support/ha-addon-rules.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ADDON = join(ROOT, 'addon');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const yamlFile = (path: string): unknown => parse(read(path));

const rawConfig = () => structuredClone(yamlFile('addon/config.yaml')) as Record<string, unknown>;
const config = (): AddonConfig => addonConfigSchema.parse(rawConfig());
const configProblems = (c: unknown) => problems(addonConfigSchema.safeParse(c));

describe('addon/config.yaml against the Supervisor rules', () => {
  it('is a valid add-on config', () => {
    expect(configProblems(rawConfig())).toEqual([]);
    const c = config();
    // An explicit null reads as "no value" to the Supervisor and the add-on silently loses the key.
    for (const [key, value] of Object.entries(rawConfig())) expect(value, key).not.toBeNull();
    expect(c.arch).toEqual(['amd64', 'aarch64']);
    expect(c.image).toMatch(/\{arch\}/);
  });

  it('every schema entry is an option type, and the defaults pass the checks the Supervisor runs before start', () => {
    const c = config();
    expect(c.schema).toBeTypeOf('object');
    const schema = c.schema as Record<string, string>;
    for (const [key, element] of Object.entries(schema)) expect(SCHEMA_ELEMENT.test(element), `${key}: ${element}`).toBe(true);
    expect(optionProblems(schema, c.options ?? {})).toEqual([]);
  });

  it('the options schema is the one the runner reads: same keys, and the defaults map to a valid environment', () => {
    const c = config();
    expect(Object.keys(c.schema as object).sort()).toEqual(Object.keys(addonOptionsSchema.shape).sort());
    expect(addonOptionsSchema.safeParse(c.options).success).toBe(true);
    // Options left blank arrive absent; the optional ones must stay optional on both sides.
    for (const [key, element] of Object.entries(c.schema as Record<string, string>)) {
      if (element.endsWith('?')) expect(addonOptionsSchema.shape[key as keyof typeof addonOptionsSchema.shape].safeParse(undefined).success, key).toBe(true);
    }
  });

  it('every option and published port has an English translation, and nothing stale is translated', () => {
    const translations = translationsSchema.safeParse(yamlFile('addon/translations/en.yaml'));
    expect(problems(translations)).toEqual([]);
    expect(translationProblems(config(), translations.data!)).toEqual([]);
    // The checker itself: an option without a translation is reported.
    const c = config();
    const withExtra = { ...c, schema: { ...(c.schema as object), new_option: 'bool' } };
    expect(translationProblems(withExtra, translations.data!)).toContain('configuration.new_option: option has no translation');
  });

  it('the version is a quoted semver equal to package.json, with a changelog entry', () => {
    const c = config();
    expect(c.version).toBe((JSON.parse(read('package.json')) as { version: string }).version);
    expect(read('addon/CHANGELOG.md')).toMatch(new RegExp(`^## \\[?${c.version.replace(/\./g, '\\.')}\\]?\\b`, 'm'));
  });

  it('accepts the WireGuard hub settings: NET_ADMIN, /dev/net/tun and a UDP port', () => {
    const c = rawConfig();
    c.privileged = ['NET_ADMIN'];
    c.devices = ['/dev/net/tun'];
    c.ports = { ...(c.ports as object), '51820/udp': 51820 };
    c.ports_description = { ...(c.ports_description as object), '51820/udp': 'WireGuard hub for nodes behind NAT' };
    expect(configProblems(c)).toEqual([]);
  });

  it('rejects what the Supervisor rejects or silently drops', () => {
    const cases: [string, (c: Record<string, unknown>) => void, string][] = [
      ['missing slug', (c) => delete c.slug, 'slug'],
      ['slug with a space', (c) => (c.slug = 'rezus cloud'), 'slug'],
      ['unknown architecture', (c) => (c.arch = ['x86_64']), 'arch.0'],
      ['deprecated architecture', (c) => (c.arch = ['amd64', 'armv7']), 'arch'],
      ['unquoted version read as a number', (c) => (c.version = 0.1), 'version'],
      ['startup value', (c) => (c.startup = 'after-network'), 'startup'],
      ['boot value', (c) => (c.boot = 'always'), 'boot'],
      ['stage value', (c) => (c.stage = 'beta'), 'stage'],
      ['backup value', (c) => (c.backup = 'warm'), 'backup'],
      ['hassio_role value', (c) => (c.hassio_role = 'root'), 'hassio_role'],
      ['boolean as text', (c) => (c.ingress = 'yes'), 'ingress'],
      ['timeout under 10 s', (c) => (c.timeout = 5), 'timeout'],
      ['timeout over 300 s', (c) => (c.timeout = 600), 'timeout'],
      ['typo in a key', (c) => (c.ingres = true), '(root)'],
      ['unknown capability', (c) => (c.privileged = ['NET_ADMN']), 'privileged.0'],
      ['old device format', (c) => (c.devices = ['/dev/net/tun:/dev/net/tun:rwm']), 'devices.0'],
      ['port protocol', (c) => (c.ports = { '51820/sctp': 51820 }), 'ports.51820/sctp'],
      ['host port out of range', (c) => (c.ports = { '8099/tcp': 70000 }), 'ports.8099/tcp'],
      ['description of an unlisted port', (c) => (c.ports_description = { '9000/tcp': 'x' }), 'ports_description.9000/tcp'],
      ['watchdog without [HOST]', (c) => (c.watchdog = 'http://localhost:8099/healthz'), 'watchdog'],
      ['image with a tag', (c) => (c.image = 'ghcr.io/rezuscloud/{arch}-addon-rezuscloud:0.1.0'), 'image'],
      ['image with capitals', (c) => (c.image = 'ghcr.io/RezusCloud/{arch}-addon'), 'image'],
      ['url without scheme', (c) => (c.url = 'github.com/rezuscloud'), 'url'],
      ['map entry', (c) => (c.map = ['sharing:rw']), 'map.0'],
      ['schema type misspelt', (c) => ((c.schema as Record<string, unknown>).log_level = 'string'), 'schema.log_level'],
      ['schema range with dots', (c) => ((c.schema as Record<string, unknown>).worker_concurrency = 'int(1..64)'), 'schema.worker_concurrency'],
      ['schema empty list', (c) => ((c.schema as Record<string, unknown>).log_level = 'list()'), 'schema.log_level'],
      ['schema default syntax', (c) => ((c.schema as Record<string, unknown>).collect_cron = 'str=* * * * *'), 'schema.collect_cron'],
      ['cold backup with hooks', (c) => (c.backup_pre = 'sync'), 'backup'],
    ];
    for (const [what, mutate, path] of cases) {
      const c = rawConfig();
      mutate(c);
      const found = configProblems(c);
      expect(found.some((p) => p.startsWith(`${path}:`)), `${what}: ${JSON.stringify(found)}`).toBe(true);
    }
  });

  it('accepts every documented option type, and the option checks catch bad defaults', () => {
    for (const ok of ['str', 'str?', 'str(3,)', 'bool', 'int', 'int(-5,5)', 'float(0.5,2)', 'email', 'url', 'port', 'password', 'password?', 'match(^a+$)', 'list(a|b|c)', 'list(a|b)?', 'device', 'device(subsystem=tty)']) {
      expect(SCHEMA_ELEMENT.test(ok), ok).toBe(true);
    }
    for (const bad of ['string', 'integer', 'int(1-5)', 'list()', 'str=x', 'bool??', 'float(a,b)', 'port(1,2)']) {
      expect(SCHEMA_ELEMENT.test(bad), bad).toBe(false);
    }
    const schema = { a: 'int(1,4)', b: 'list(x|y)', c: 'match(^[0-9]+[smhd]$)', d: 'str', e: 'port?', f: ['str'] };
    expect(optionProblems(schema, { a: 2, b: 'x', c: '24h', d: '', f: ['q'] })).toEqual([]);
    const found = optionProblems(schema, { a: 9, b: 'z', c: 'day', d: 3, e: 0, f: 'q', g: true });
    expect(found.map((p) => p.split(':')[0])).toEqual(['options.a', 'options.b', 'options.c', 'options.d', 'options.e', 'options.f', 'options.g']);
    expect(optionProblems(schema, { b: 'x', c: '1s', d: '', f: [] })).toEqual([
      'options.a: required (no "?") but has no default, so the add-on cannot start until it is set',
    ]);
  });
});

/** Width and height from a PNG's IHDR chunk, after checking the signature. */
function pngSize(path: string): { width: number; height: number } {
  const png = readFileSync(join(ROOT, path));
  expect(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), `${path} is a PNG`).toBe(true);
  expect(png.subarray(12, 16).toString('latin1')).toBe('IHDR');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

describe('store artwork', () => {
  it('icon.png is square and logo.png is a wide banner, the shapes the add-on store shows', () => {
    const icon = pngSize('addon/icon.png');
    expect(icon.width).toBe(icon.height);
    expect(icon.width).toBeGreaterThanOrEqual(128);
    const logo = pngSize('addon/logo.png');
    expect(logo.width / logo.height).toBeGreaterThanOrEqual(2);
    expect(logo.width / logo.height).toBeLessThanOrEqual(3);
  });
});

describe('repository.yaml', () => {
  it('has what the Supervisor needs to add the repository by URL', () => {
    const repo = repositorySchema.safeParse(yamlFile('repository.yaml'));
    expect(problems(repo)).toEqual([]);
    expect(repo.data!.url).toBe(config().url);
    expect(problems(repositorySchema.safeParse({ url: 'https://example.com' }))).toEqual(['name: Invalid input: expected string, received undefined']);
    expect(problems(repositorySchema.safeParse({ name: 'x', url: 'not a url' }))[0]).toMatch(/^url:/);
  });
});

describe('addon/Dockerfile builds from the add-on folder alone', () => {
  const instructions = parseDockerfile(read('addon/Dockerfile'));
  const built = stages(instructions);

  it('every COPY/ADD source from the build context exists inside addon/', () => {
    const specs = copySpecs(instructions);
    expect(specs.length).toBeGreaterThan(0);
    const stageNames = new Set<string>();
    for (const stage of built) {
      for (const spec of copySpecs(stage.instructions)) {
        if (spec.from !== undefined) {
          // Another stage (defined above) or an image; never the repository root.
          expect(stageNames.has(spec.from) || /[/:]/.test(spec.from), `line ${spec.line}: --from=${spec.from}`).toBe(true);
          continue;
        }
        expect(spec.sources.length, `line ${spec.line}`).toBeGreaterThan(0);
        for (const source of spec.sources) {
          if (spec.keyword === 'ADD' && /^(https?|git):\/\//.test(source)) continue;
          expect(/[*?[]/.test(source), `line ${spec.line}: wildcards are not checked: ${source}`).toBe(false);
          const target = resolve(ADDON, source);
          const rel = relative(ADDON, target);
          expect(rel.startsWith('..') || isAbsolute(rel), `line ${spec.line}: ${source} is outside addon/`).toBe(false);
          expect(existsSync(target), `line ${spec.line}: ${source} does not exist in addon/`).toBe(true);
        }
      }
      if (stage.name) stageNames.add(stage.name);
    }
  });

  it('the checker catches sources that are not in the add-on folder', () => {
    const bad = parseDockerfile('FROM node:24 AS a\nCOPY package.json package-lock.json ./\nCOPY ../runner /app/runner\nCOPY --from=a /x /y\nCOPY icon.png \\\n  /icon.png\n');
    const sources = copySpecs(bad).filter((s) => !s.from).flatMap((s) => s.sources);
    expect(sources).toEqual(['package.json', 'package-lock.json', '../runner', 'icon.png']);
    expect(sources.filter((s) => existsSync(resolve(ADDON, s)) && !relative(ADDON, resolve(ADDON, s)).startsWith('..'))).toEqual(['icon.png']);
  });

  it('every apt-get install uses --no-install-recommends', () => {
    const installs = aptInstalls(instructions);
    expect(installs.length).toBeGreaterThan(0);
    for (const i of installs) expect(i.command, `line ${i.line}`).toMatch(/(^|\s)--no-install-recommends(\s|$)/);
    const sample = parseDockerfile('RUN apt-get update && apt-get install -y curl \\\n && apt-get -y install --no-install-recommends git; apt install jq\n');
    expect(aptInstalls(sample).map((i) => /--no-install-recommends/.test(i.command))).toEqual([false, true, false]);
  });

  it('runs the compiled add-on entry on Node 24, labelled with BUILD_VERSION', () => {
    const final = built.at(-1)!;
    expect(final.image).toMatch(/(^|\/)node:24[-.]/);
    const finalArgs = final.instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=')[0]);
    expect(finalArgs).toEqual(expect.arrayContaining(['BUILD_VERSION', 'BUILD_ARCH']));
    const labels = final.instructions.filter((i) => i.keyword === 'LABEL').map((i) => i.args).join(' ');
    expect(labels).toMatch(/io\.hass\.version="\$\{BUILD_VERSION\}"/);
    expect(labels).toMatch(/io\.hass\.arch="\$\{BUILD_ARCH\}"/);
    expect(labels).toMatch(/io\.hass\.type="addon"/);
    const cmd = final.instructions.filter((i) => i.keyword === 'CMD').at(-1)!;
    // The image runs node as `npm start` does: the same flags, on the add-on entry.
    const startFlags = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start.split(/\s+/).filter((w) => w.startsWith('--'));
    expect(JSON.parse(cmd.args)).toEqual(['node', ...startFlags, 'dist/runner/addon-main.js']);
    // dist/ mirrors the source tree, so the entry compiles from runner/addon-main.ts.
    expect(statSync(join(ROOT, 'runner/addon-main.ts')).isFile()).toBe(true);
  });

  it('pins OpenTofu by version and SHA256SUMS digest, and builds the program from the tag of this version', () => {
    const args = new Map(instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=', 2) as [string, string | undefined]));
    expect(args.get('TOFU_VERSION')).toMatch(/^\d+\.\d+\.\d+$/);
    expect(args.get('TOFU_SHA256SUMS_SHA256')).toMatch(/^[0-9a-f]{64}$/);
    expect(args.get('REZUS_SOURCE')).toBe(config().url);
    const build = built.find((s) => s.name === 'build')!;
    // Without REZUS_REF the source is the release tag of the version the Supervisor builds.
    expect(build.instructions.some((i) => i.keyword === 'RUN' && i.args.includes('${REZUS_REF:-v${BUILD_VERSION}}'))).toBe(true);
    expect(build.instructions.some((i) => i.keyword === 'RUN' && /npm ci\b.*npm run build/.test(i.args))).toBe(true);
  });
});

describe('the CI workflow publishes what config.yaml installs', () => {
  interface Step { uses?: string; with?: Record<string, string> }
  const workflow = yamlFile('.github/workflows/addon.yaml') as { env: Record<string, string>; jobs: Record<string, { steps: Step[] }> };
  const steps = Object.values(workflow.jobs).flatMap((j) => j.steps);
  const builder = (action: string) => steps.find((s) => s.uses?.startsWith(`home-assistant/builder/actions/${action}@`));

  it('builds the architectures of config.yaml into its image name, from the add-on folder', () => {
    const c = config();
    expect((JSON.parse(workflow.env.ARCHITECTURES!) as string[]).sort()).toEqual([...c.arch].sort());
    // prepare-multi-arch-matrix names images <registry-prefix>/<arch>-<image-name>, prefix ghcr.io/<owner>.
    const owner = new URL(c.url!).pathname.split('/')[1]!.toLowerCase();
    expect(builder('prepare-multi-arch-matrix')?.with?.['registry-prefix']).toBeUndefined();
    expect(c.image).toBe(`ghcr.io/${owner}/{arch}-${workflow.env.IMAGE_NAME}`);
    const build = builder('build-image')!;
    expect(build.with?.context).toBe('addon');
    expect(build.with?.file).toBeUndefined();
    expect(builder('publish-multi-arch-manifest')).toBeDefined();
    for (const s of steps.filter((x) => x.uses?.startsWith('home-assistant/'))) expect(s.uses, 'pinned to a commit').toMatch(/@[0-9a-f]{40}$/);
  });
});
