// What the Home Assistant Supervisor requires of an add-on repository, written down from its
// source (home-assistant/supervisor at 090ef31, August 2026: supervisor/apps/validate.py,
// apps/options.py, apps/const.py, const.py, validate.py, docker/const.py, store/validate.py).
// The Supervisor drops an add-on whose config.yaml it cannot read with a log line only (the
// repository then shows up empty), and silently drops unknown keys and bad map entries; here
// each of those is an error, so a typo fails the test instead of the install.
import { z } from 'zod';

export const ARCHES = ['aarch64', 'amd64'] as const;
/** Accepted by the Supervisor with a warning; nothing runs them any more. */
export const DEPRECATED_ARCHES = ['armhf', 'armv7', 'i386'] as const;
const STARTUP = ['initialize', 'system', 'services', 'application', 'once'] as const;
const BOOT = ['auto', 'manual', 'manual_only'] as const;
const STAGE = ['stable', 'experimental', 'deprecated'] as const;
const BACKUP = ['hot', 'cold'] as const;
const HASSIO_ROLES = ['default', 'homeassistant', 'backup', 'manager', 'admin'] as const;
const CAPABILITIES = [
  'BPF', 'CHECKPOINT_RESTORE', 'DAC_READ_SEARCH', 'IPC_LOCK', 'NET_ADMIN', 'NET_RAW', 'PERFMON',
  'SYS_ADMIN', 'SYS_MODULE', 'SYS_NICE', 'SYS_PTRACE', 'SYS_RAWIO', 'SYS_RESOURCE', 'SYS_TIME',
] as const;
const MAP_TYPES = [
  'data', 'config', 'ssl', 'local_apps', 'backup', 'share', 'media', 'homeassistant_config',
  'all_app_configs', 'app_config', 'addons', 'all_addon_configs', 'addon_config',
] as const;
const MACHINES = [
  'intel-nuc', 'khadas-vim3', 'generic-aarch64', 'generic-x86-64', 'odroid-c2', 'odroid-c4', 'odroid-m1',
  'odroid-n2', 'odroid-xu', 'qemuarm-64', 'qemuarm', 'qemux86-64', 'qemux86', 'raspberrypi', 'raspberrypi2',
  'raspberrypi3-64', 'raspberrypi3', 'raspberrypi4-64', 'raspberrypi4', 'raspberrypi5-64', 'yellow', 'green', 'tinker',
];
// Ports the Supervisor may pick for ingress when ingress_port is 0; the add-on must not map them.
const INGRESS_DYNAMIC_PORTS = { min: 62000, max: 65500 };

/**
 * One option type in `schema:`: bool, email, url, port, device[(subsystem=x)], str[(min,max)],
 * password[(min,max)], int[(min,max)], float[(min,max)], match(regex), list(a|b|c); a trailing
 * `?` makes it optional. Same grammar as the Supervisor's RE_SCHEMA_ELEMENT.
 */
export const SCHEMA_ELEMENT =
  /^(?:bool|email|url|port|device(?:\((?<filter>subsystem=[a-z]+)\))?|str(?:\((?<sMin>\d+)?,(?<sMax>\d+)?\))?|password(?:\((?<pMin>\d+)?,(?<pMax>\d+)?\))?|int(?:\((?<iMin>-?\d+)?,(?<iMax>-?\d+)?\))?|float(?:\((?<fMin>-?\d*\.?\d+)?,(?<fMax>-?\d*\.?\d+)?\))?|match\((?<match>.*)\)|list\((?<list>.+)\))?\??$/;

const SLUG = /^[-_.A-Za-z0-9]+$/;
const DOCKER_PORT = /^\d+(?:\/tcp|\/udp)?$/;
const WATCHDOG = /^(?:https?|\[PROTO:\w+\]|tcp):\/\/\[HOST\]:(\[PORT:\d+\]|\d+).*$/;
const WEBUI = /^(?:https?|\[PROTO:\w+\]):\/\/\[HOST\]:\[PORT:\d+\].*$/;
const VOLUME = /^(data|config|ssl|local_apps|addons|backup|share|media|homeassistant_config|all_app_configs|all_addon_configs|app_config|addon_config)(?::(rw|ro))?$/;
const SERVICE = /^(mqtt|mysql):(provide|want|need)$/;
const IMAGE_COMPONENT = /^[a-z0-9{][a-z0-9.\-_{}]*$/;
const REGISTRY_DOMAIN = /^(?:localhost|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*)(?::\d+)?$/;

/** vol.Url(): anything urlparse splits into a scheme and a host. */
const url = z.string().refine((v) => {
  try {
    const u = new URL(v);
    return u.protocol.length > 1 && u.host.length > 0;
  } catch {
    return false;
  }
}, 'must be a URL with a scheme and a host');

const port = z.number().int().min(1).max(65535);
const dockerPort = z.string().regex(DOCKER_PORT, 'must be a container port like "8099/tcp" or "51820/udp"');
// The Supervisor coerces versions with AwesomeVersion, which takes anything; YAML would read an
// unquoted 1.10 as the number 1.1, so a version here must be a string.
const version = z.string().regex(/^\d+\.\d+\.\d+(?:[-+.][0-9A-Za-z.-]+)?$/, 'must be a quoted version like "1.2.3"');

/** The Supervisor's docker_image: optional registry, lowercase path components, no tag. */
export function dockerImageProblem(image: string): string | undefined {
  const slash = image.indexOf('/');
  let path = image;
  if (slash > 0) {
    const first = image.slice(0, slash);
    if (first.includes('.') || first.includes(':') || first === 'localhost' || first !== first.toLowerCase()) {
      if (first !== first.toLowerCase()) return `registry must be lowercase: ${image}`;
      if (!REGISTRY_DOMAIN.test(first)) return `invalid registry "${first}"`;
      path = image.slice(slash + 1);
    }
  }
  if (!path) return 'image has no name';
  if (path.includes(':')) return 'image must not carry a tag (the tag is `version`)';
  const bad = path.split('/').find((c) => !IMAGE_COMPONENT.test(c));
  return bad === undefined ? undefined : `invalid image path component "${bad}"`;
}

type SchemaElement = string | SchemaElement[] | { [key: string]: SchemaElement };
const schemaElement: z.ZodType<SchemaElement> = z.lazy(() =>
  z.union([
    z.string().regex(SCHEMA_ELEMENT, 'is not an option type (str, int(min,max), bool, list(a|b), password, port, url, match(re), …, optional with a trailing ?)'),
    // A list holds one element type, and may not directly hold another list.
    z.array(z.union([z.string().regex(SCHEMA_ELEMENT, 'is not an option type'), z.record(z.string(), schemaElement)])).length(1),
    z.record(z.string(), schemaElement),
  ]),
);

const mapEntry = z.union([
  z.string().regex(VOLUME, 'is not a folder mapping like "share:rw"'),
  z.strictObject({ type: z.enum(MAP_TYPES), read_only: z.boolean().optional(), path: z.string().optional() }),
]);

const ulimit = z.union([z.number().int(), z.strictObject({ soft: z.number().int(), hard: z.number().int() })]);

export const addonConfigSchema = z
  .strictObject({
    name: z.string().min(1),
    version,
    slug: z.string().regex(SLUG, 'may hold only letters, digits, "-", "_" and "."'),
    description: z.string().min(1),
    arch: z.array(z.enum([...ARCHES, ...DEPRECATED_ARCHES])).min(1),
    machine: z.array(z.string().refine((m) => MACHINES.includes(m.replace(/^!/, '')), 'is not a machine type')).optional(),
    url: url.optional(),
    startup: z.enum(STARTUP).optional(),
    boot: z.enum(BOOT).optional(),
    init: z.boolean().optional(),
    stage: z.enum(STAGE).optional(),
    ports: z.record(dockerPort, port.nullable()).optional(),
    ports_description: z.record(dockerPort, z.string()).optional(),
    watchdog: z.string().regex(WATCHDOG, 'must look like http://[HOST]:[PORT:8099]/path or tcp://[HOST]:[PORT:…]').optional(),
    webui: z.string().regex(WEBUI, 'must look like http://[HOST]:[PORT:8099]/path').optional(),
    ingress: z.boolean().optional(),
    ingress_port: z.union([port, z.literal(0)]).optional(),
    ingress_entry: z.string().optional(),
    ingress_stream: z.boolean().optional(),
    panel_icon: z.string().regex(/^mdi:[a-z0-9-]+$/, 'must be a Material Design icon like mdi:puzzle').optional(),
    panel_title: z.string().optional(),
    panel_admin: z.boolean().optional(),
    homeassistant: version.optional(),
    host_network: z.boolean().optional(),
    host_pid: z.boolean().optional(),
    host_ipc: z.boolean().optional(),
    host_uts: z.boolean().optional(),
    host_dbus: z.boolean().optional(),
    // The old "host:container:perm" form is migrated with a warning; only paths are current.
    devices: z.array(z.string().regex(/^\/dev\/[^:\s]+$/, 'must be a device path like /dev/net/tun')).optional(),
    udev: z.boolean().optional(),
    tmpfs: z.boolean().optional(),
    map: z.array(mapEntry).optional(),
    environment: z.record(z.string().regex(/^\w*$/), z.string()).optional(),
    privileged: z.array(z.enum(CAPABILITIES)).optional(),
    apparmor: z.boolean().optional(),
    full_access: z.boolean().optional(),
    audio: z.boolean().optional(),
    video: z.boolean().optional(),
    gpio: z.boolean().optional(),
    usb: z.boolean().optional(),
    uart: z.boolean().optional(),
    devicetree: z.boolean().optional(),
    kernel_modules: z.boolean().optional(),
    realtime: z.boolean().optional(),
    hassio_api: z.boolean().optional(),
    hassio_role: z.enum(HASSIO_ROLES).optional(),
    homeassistant_api: z.boolean().optional(),
    stdin: z.boolean().optional(),
    legacy: z.boolean().optional(),
    docker_api: z.boolean().optional(),
    auth_api: z.boolean().optional(),
    services: z.array(z.string().regex(SERVICE, 'must be mqtt|mysql:provide|want|need')).optional(),
    discovery: z.array(z.string()).optional(),
    backup_exclude: z.array(z.string()).optional(),
    backup_pre: z.string().optional(),
    backup_post: z.string().optional(),
    backup: z.enum(BACKUP).optional(),
    options: z.record(z.string(), z.unknown()).optional(),
    schema: z.union([z.record(z.string(), schemaElement), z.literal(false)]).optional(),
    image: z.string().superRefine((v, ctx) => {
      const problem = dockerImageProblem(v);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }).optional(),
    ulimits: z.record(z.string(), ulimit).optional(),
    timeout: z.number().int().min(10).max(300).optional(),
    journald: z.boolean().optional(),
    breaking_versions: z.array(version).optional(),
  })
  .superRefine((c, ctx) => {
    // What the Supervisor only warns about or silently ignores, made errors.
    const deprecated = c.arch.filter((a) => (DEPRECATED_ARCHES as readonly string[]).includes(a));
    if (deprecated.length) ctx.addIssue({ code: 'custom', path: ['arch'], message: `deprecated architectures: ${deprecated.join(', ')}` });
    if (c.full_access && (c.devices?.length || c.uart || c.usb || c.gpio)) {
      ctx.addIssue({ code: 'custom', path: ['full_access'], message: 'full_access makes devices/uart/usb/gpio redundant; the Supervisor ignores them' });
    }
    if (c.backup === 'cold' && (c.backup_pre || c.backup_post)) {
      ctx.addIssue({ code: 'custom', path: ['backup'], message: 'cold backups ignore backup_pre/backup_post' });
    }
    if (c.ingress && c.ingress_port === 0) {
      for (const p of Object.keys(c.ports ?? {})) {
        const n = Number(p.split('/')[0]);
        if (n >= INGRESS_DYNAMIC_PORTS.min && n <= INGRESS_DYNAMIC_PORTS.max) {
          ctx.addIssue({ code: 'custom', path: ['ports', p], message: 'ports 62000-65500 are reserved for dynamic ingress ports' });
        }
      }
    }
    for (const p of Object.keys(c.ports_description ?? {})) {
      if (!(p in (c.ports ?? {}))) ctx.addIssue({ code: 'custom', path: ['ports_description', p], message: 'describes a port that `ports` does not list' });
    }
  });

export type AddonConfig = z.output<typeof addonConfigSchema>;

export const repositorySchema = z.strictObject({
  name: z.string().min(1),
  url: url.optional(),
  maintainer: z.string().min(1).optional(),
});

const translationEntry: z.ZodType<{ name: string; description?: string | null; fields?: Record<string, unknown> }> = z.lazy(() =>
  z.strictObject({
    name: z.string().min(1),
    description: z.string().nullable().optional(),
    fields: z.record(z.string(), translationEntry).optional(),
  }),
);

export const translationsSchema = z.strictObject({
  configuration: z.record(z.string(), translationEntry).optional(),
  network: z.record(dockerPort, z.string()).optional(),
});

/** Zod issues as "path: message" lines, for assertions that show what is wrong. */
export function problems(result: { success: boolean; error?: z.ZodError }): string[] {
  if (result.success || !result.error) return [];
  return result.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(root)'}: ${i.message}`);
}

const isOptional = (element: SchemaElement) =>
  (typeof element === 'string' && element.endsWith('?')) ||
  (Array.isArray(element) && typeof element[0] === 'string' && element[0].endsWith('?'));

/**
 * Checks option values against `schema:` as the Supervisor does before every start: unknown
 * options are dropped (an error here), a missing option without `?` stops the add-on, and each
 * value must fit its type. Used on `options:`, the defaults a fresh install starts with.
 */
export function optionProblems(schema: Record<string, SchemaElement>, options: Record<string, unknown>, where = 'options'): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(options)) {
    const element = schema[key];
    if (element === undefined) out.push(`${where}.${key}: not in schema (the Supervisor drops it)`);
    else out.push(...valueProblems(element, value, `${where}.${key}`));
  }
  for (const [key, element] of Object.entries(schema)) {
    if (!(key in options) && !isOptional(element)) out.push(`${where}.${key}: required (no "?") but has no default, so the add-on cannot start until it is set`);
  }
  return out;
}

function valueProblems(element: SchemaElement, value: unknown, where: string): string[] {
  if (Array.isArray(element)) {
    if (!Array.isArray(value)) return [`${where}: must be a list`];
    return value.flatMap((v, i) => valueProblems(element[0]!, v, `${where}[${i}]`));
  }
  if (typeof element === 'object') {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${where}: must be a mapping`];
    return optionProblems(element, value as Record<string, unknown>, where);
  }
  if (value === null || value === undefined) return [`${where}: missing required value`];
  const m = SCHEMA_ELEMENT.exec(element);
  if (!m?.groups) return [`${where}: unknown type ${element}`];
  const g = m.groups;
  const within = (n: number, min?: string, max?: string) => (min === undefined || n >= Number(min)) && (max === undefined || n <= Number(max));
  const type = element.replace(/[?(].*$/, '');
  const bad = (why: string) => [`${where}: ${JSON.stringify(value)} ${why} (${element})`];
  switch (type) {
    case 'str':
    case 'password': {
      if (typeof value !== 'string') return bad('is not a string');
      const [min, max] = type === 'str' ? [g.sMin, g.sMax] : [g.pMin, g.pMax];
      return within(value.length, min, max) ? [] : bad('has a length out of range');
    }
    case 'int':
      return Number.isInteger(value) && within(value as number, g.iMin, g.iMax) ? [] : bad('is not an integer in range');
    case 'float':
      return typeof value === 'number' && within(value, g.fMin, g.fMax) ? [] : bad('is not a number in range');
    case 'bool':
      return typeof value === 'boolean' ? [] : bad('is not a boolean');
    case 'port':
      return port.safeParse(value).success ? [] : bad('is not a port');
    case 'url':
      return url.safeParse(value).success ? [] : bad('is not a URL');
    case 'email':
      return typeof value === 'string' && /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(value) ? [] : bad('is not an e-mail address');
    case 'match': {
      // vol.Match is re.match: anchored at the start only.
      const re = new RegExp(g.match!, 'y');
      return re.test(String(value)) ? [] : bad('does not match');
    }
    case 'list':
      return g.list!.split('|').includes(String(value)) ? [] : bad('is not one of the choices');
    case 'device':
      return typeof value === 'string' ? [] : bad('is not a device path');
    default:
      return bad('has an unknown type');
  }
}

/** Every option needs a translated name; translations of options or ports that do not exist are stale. */
export function translationProblems(config: AddonConfig, translations: z.output<typeof translationsSchema>): string[] {
  const out: string[] = [];
  const schema = config.schema || {};
  const names = translations.configuration ?? {};
  for (const key of Object.keys(schema)) if (!names[key]) out.push(`configuration.${key}: option has no translation`);
  for (const key of Object.keys(names)) if (!(key in schema)) out.push(`configuration.${key}: translates an option that does not exist`);
  const ports = config.ports ?? {};
  for (const p of Object.keys(ports)) {
    if (!translations.network?.[p] && !config.ports_description?.[p]) out.push(`network.${p}: port has no description`);
  }
  for (const p of Object.keys(translations.network ?? {})) if (!(p in ports)) out.push(`network.${p}: describes a port that does not exist`);
  return out;
}
