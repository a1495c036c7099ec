// Applies the hub's WireGuard config to a real interface (Node-only: runs `ip`, `wg`, `wireguard-go`).
// Kernel WireGuard when the module is there, else wireguard-go on /dev/net/tun.
import { constants } from 'node:fs';
import { access, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { parseWgDump, renderHubConfig, type HubConfigInput } from './hub-config.ts';
import type { HubMode, HubStatus } from './hub-driver-types.ts';

export interface HubDriverOptions {
  interfaceName: string;
  /** Prepended to every command, e.g. `['ip', 'netns', 'exec', 'ns1']` to drive a namespace. */
  commandPrefix?: string[];
  wgBin?: string;
  wireguardGoBin?: string;
  ipBin?: string;
  tunPath?: string;
  /** Where the effective capabilities are read; tests point it elsewhere. */
  procStatusPath?: string;
  /** How long wireguard-go may take to create its interface. */
  startTimeoutMs?: number;
  env?: Record<string, string>;
  /**
   * Where the config file `wg syncconf` reads is written (it holds the hub's private key for a
   * moment): the runner's own data dir rather than a shared /tmp. What a crash left there is
   * removed before the first apply.
   */
  scratchDir?: string;
}

const SCRATCH_PREFIX = 'rzwg-';

export interface HubApplyInput extends HubConfigInput {
  /** The hub's overlay addresses with the overlay prefix lengths, e.g. `100.64.0.1/10`. */
  addresses: string[];
  mtu?: number;
}

export type { HubMode, HubStatus };

const CAP_NET_ADMIN = 12n;
const HUB_MTU = 1420;

export class HubUnavailableError extends Error {
  override name = 'HubUnavailableError';
  constructor(readonly missing: string[]) {
    super(`WireGuard hub unavailable: ${missing.join('; ')}`);
  }
}

export function createHubDriver(opts: HubDriverOptions) {
  const prefix = opts.commandPrefix ?? [];
  const wg = opts.wgBin ?? 'wg';
  const wgGo = opts.wireguardGoBin ?? 'wireguard-go';
  const ip = opts.ipBin ?? 'ip';
  const tun = opts.tunPath ?? '/dev/net/tun';
  const name = opts.interfaceName;
  const env = { WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD: '1', ...opts.env };
  let swept: Promise<string> | undefined;
  /**
   * The scratch dir, cleared once of the key files a crash between write and remove left. Only a
   * dir of the runner's own is swept: in a shared /tmp another driver's file may be in use.
   */
  const scratch = (): Promise<string> =>
    (swept ??= (async () => {
      if (!opts.scratchDir) return tmpdir();
      const dir = opts.scratchDir;
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const stale = (await readdir(dir)).filter((n) => n.startsWith(SCRATCH_PREFIX));
      await Promise.all(stale.map((n) => rm(join(dir, n), { recursive: true, force: true })));
      return dir;
    })());
  let mode: HubMode | null = null;
  let userspace: ResultPromise | undefined;

  const cmd = (file: string, args: string[]) => (prefix.length > 0 ? [prefix[0] as string, [...prefix.slice(1), file, ...args]] as const : [file, args] as const);
  const run = (file: string, args: string[], input?: string) => {
    const [f, a] = cmd(file, args);
    return execa(f, a, { input, reject: false, timeout: 15_000, env, stripFinalNewline: true });
  };

  async function binaryMissing(file: string, probe: string[]): Promise<boolean> {
    const r = await run(file, probe);
    return (r as { code?: string }).code === 'ENOENT' || r.exitCode === 127;
  }

  async function hasNetAdmin(): Promise<boolean> {
    try {
      const status = await readFile(opts.procStatusPath ?? '/proc/self/status', 'utf8');
      const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
      return hex !== undefined && ((BigInt(`0x${hex}`) >> CAP_NET_ADMIN) & 1n) === 1n;
    } catch {
      return false;
    }
  }

  async function tunUsable(): Promise<boolean> {
    try {
      await access(tun, constants.R_OK | constants.W_OK);
      return true;
    } catch {
      return false;
    }
  }

  const linkExists = async () => (await run(ip, ['link', 'show', 'dev', name])).exitCode === 0;

  /** What is missing before anything is tried: binaries and the capability. */
  async function preflight(): Promise<string[]> {
    const missing: string[] = [];
    if (await binaryMissing(ip, ['-V'])) missing.push(`the \`${ip}\` binary (iproute2) is not installed`);
    if (await binaryMissing(wg, ['--version'])) missing.push(`the \`${wg}\` binary (wireguard-tools) is not installed`);
    if (!(await hasNetAdmin())) missing.push('the CAP_NET_ADMIN capability (Home Assistant add-on: privileged: [NET_ADMIN])');
    return missing;
  }

  async function createUserspace(): Promise<void> {
    const [f, a] = cmd(wgGo, ['-f', name]);
    const child = execa(f, a, { env, reject: false, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe', detached: false });
    userspace = child;
    let exited = false;
    void child.then(() => {
      exited = true;
      if (userspace === child) userspace = undefined;
    });
    const deadline = Date.now() + (opts.startTimeoutMs ?? 5_000);
    while (Date.now() < deadline && !exited) {
      if (await linkExists()) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGTERM');
    const result = await child;
    const reason = String(result.stderr ?? '').split('\n').filter(Boolean).pop() ?? 'did not create the interface';
    throw new HubUnavailableError([`wireguard-go could not start: ${reason}`]);
  }

  async function ensureInterface(): Promise<HubMode> {
    if (mode && (await linkExists())) return mode;
    const missing = await preflight();
    if (missing.length > 0) throw new HubUnavailableError(missing);
    if (await linkExists()) {
      mode = userspace ? 'userspace' : 'kernel';
      return mode;
    }
    const kernel = await run(ip, ['link', 'add', 'dev', name, 'type', 'wireguard']);
    if (kernel.exitCode === 0) return (mode = 'kernel');
    const userspaceMissing: string[] = [];
    if (await binaryMissing(wgGo, ['--version'])) userspaceMissing.push(`the \`${wgGo}\` binary (no kernel WireGuard module either)`);
    if (!(await tunUsable())) userspaceMissing.push(`${tun} (no kernel WireGuard module; Home Assistant add-on: devices: [/dev/net/tun])`);
    if (userspaceMissing.length > 0) throw new HubUnavailableError(userspaceMissing);
    await createUserspace();
    return (mode = 'userspace');
  }

  async function currentAddresses(): Promise<string[]> {
    const r = await run(ip, ['-j', 'address', 'show', 'dev', name]);
    if (r.exitCode !== 0) return [];
    const parsed = JSON.parse(String(r.stdout) || '[]') as { addr_info?: { local: string; prefixlen: number; scope?: string }[] }[];
    return parsed.flatMap((l) => (l.addr_info ?? []).filter((a) => a.scope !== 'link').map((a) => `${a.local}/${a.prefixlen}`));
  }

  async function must(file: string, args: string[], input?: string): Promise<string> {
    const r = await run(file, args, input);
    // stderr of wg/ip never carries the key (it only arrives on stdin), so it is safe to surface.
    if (r.exitCode !== 0) throw new Error(`${file} ${args.slice(0, 2).join(' ')} failed: ${String(r.stderr).trim() || `exit ${r.exitCode}`}`);
    return String(r.stdout);
  }

  async function close(): Promise<void> {
    await run(ip, ['link', 'del', 'dev', name]);
    const child = userspace;
    userspace = undefined;
    if (child) {
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      child.kill('SIGTERM');
      await child;
      clearTimeout(timer);
    }
    mode = null;
  }

  return {
    interfaceName: name,

    /** Creates the interface if needed and converges keys, peers, addresses and MTU. Idempotent. */
    async apply(input: HubApplyInput): Promise<HubMode> {
      const m = await ensureInterface();
      // syncconf keeps sessions of unchanged peers. wg fopen()s its config file and Node's stdio
      // pipes are sockets, so /dev/stdin will not do: a 0600 file in a private directory, removed at once.
      const dir = await mkdtemp(join(await scratch(), SCRATCH_PREFIX));
      try {
        const file = join(dir, 'hub.conf');
        await writeFile(file, renderHubConfig(input), { mode: 0o600 });
        await must(wg, ['syncconf', name, file]);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      const have = new Set(await currentAddresses());
      for (const a of input.addresses) if (!have.has(a)) await must(ip, ['address', 'add', a, 'dev', name]);
      for (const a of have) if (!input.addresses.includes(a)) await must(ip, ['address', 'del', a, 'dev', name]);
      await must(ip, ['link', 'set', 'dev', name, 'mtu', String(input.mtu ?? HUB_MTU), 'up']);
      return m;
    },

    async status(): Promise<HubStatus> {
      const missing = await preflight();
      if (missing.length > 0) return { state: 'unavailable', mode: null, missing, interface: null };
      const r = await run(wg, ['show', name, 'dump']);
      if (r.exitCode !== 0) return { state: 'down', mode, missing: [], interface: null };
      return { state: 'up', mode: mode ?? (userspace ? 'userspace' : null), missing: [], interface: parseWgDump(String(r.stdout)) };
    },

    /**
     * Runner shutdown: a wireguard-go child this driver started is stopped (its interface goes
     * with it); a kernel interface is left up and re-applied at the next start.
     */
    async stopUserspace(): Promise<void> {
      if (userspace) await close();
    },

    /** Removes the interface; a wireguard-go child exits with it. */
    close,
  };
}

export type HubDriver = ReturnType<typeof createHubDriver>;
