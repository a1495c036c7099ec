// Keeps mTLS channels to configured nodes open between collect passes, so a pass every minute does
// not pay a TLS handshake and a fresh gRPC client per node. A channel is keyed by the node's address
// and the identity of the credentials it authenticates with: a new address, CA or client
// certificate is a different key, hence a new channel; the old one is closed by invalidate() or
// once it has been idle for idleMs.
import type { TalosApiClient } from './client.ts';

export interface TalosChannelPoolOptions {
  /** A channel unused for this long is closed (default 5 minutes). */
  idleMs?: number;
  /** Milliseconds clock; tests pass their own. */
  now?: () => number;
}

interface Entry {
  client: TalosApiClient;
  identity: string;
  lastUsed: number;
}

const DEFAULT_IDLE_MS = 5 * 60_000;

export class TalosChannelPool {
  private readonly entries = new Map<string, Entry>();
  private readonly idleMs: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(opts: TalosChannelPoolOptions = {}) {
    this.idleMs = opts.idleMs ?? DEFAULT_IDLE_MS;
    this.now = opts.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The open client for (address, identity), or a new one from `create`; the caller must not close it. */
  get(address: string, identity: string, create: () => TalosApiClient): TalosApiClient {
    if (this.closed) throw new Error('talos channel pool is closed');
    const key = keyOf(address, identity);
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { client: create(), identity, lastUsed: 0 };
      this.entries.set(key, entry);
      this.schedule();
    }
    entry.lastUsed = this.now();
    return entry.client;
  }

  /** Closes the channel to `address` (e.g. after it failed, so the next pass dials afresh). */
  discard(address: string, identity: string): void {
    const key = keyOf(address, identity);
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    entry.client.close();
  }

  /** Closes every channel of a credentials identity (its certificate was replaced). */
  invalidate(identity: string): void {
    for (const [key, entry] of this.entries) {
      if (entry.identity !== identity) continue;
      this.entries.delete(key);
      entry.client.close();
    }
  }

  /** Closes channels idle for idleMs or longer; returns how many. */
  sweep(): number {
    const cutoff = this.now() - this.idleMs;
    let n = 0;
    for (const [key, entry] of this.entries) {
      if (entry.lastUsed > cutoff) continue;
      this.entries.delete(key);
      entry.client.close();
      n++;
    }
    if (this.entries.size === 0) this.stopTimer();
    return n;
  }

  close(): void {
    this.closed = true;
    this.stopTimer();
    for (const entry of this.entries.values()) entry.client.close();
    this.entries.clear();
  }

  private schedule(): void {
    if (this.timer) return;
    // A sweep every half idle period bounds a channel's idle life to 1.5 × idleMs.
    this.timer = setInterval(() => this.sweep(), Math.max(10, Math.floor(this.idleMs / 2)));
    // Idle channels must not keep the process alive.
    this.timer.unref();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

const keyOf = (address: string, identity: string): string => `${identity}\n${address}`;
