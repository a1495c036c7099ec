// What a host without the master key (the Worker) answers when asked for work only home can do.
import { DomainError } from '../../lib/errors.ts';
import type { Sealer } from '../../lib/crypto/seal.ts';

export const RUNS_AT_HOME = 'runs_at_home';

/** 409 `runs_at_home`: the request is valid, this host just cannot serve it. */
export const runsAtHome = (what: string) =>
  new DomainError('conflict', RUNS_AT_HOME, `${what} runs at home: send it to the home runner, not the edge`);

/**
 * The edge's sealer: the master key never leaves home, so anything sealed with it (cluster CAs,
 * provider credentials, tofu state, dashboard sessions) can neither be opened nor written here.
 */
export const refusingSealer: Sealer = {
  seal() {
    throw runsAtHome('sealing with the master key');
  },
  open() {
    throw runsAtHome('opening a secret sealed with the master key');
  },
  openText() {
    throw runsAtHome('opening a secret sealed with the master key');
  },
};
