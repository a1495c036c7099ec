// Types shared by the Node-only hub driver and the portable routes.
import type { InterfaceStatus } from './hub-config.ts';

export type HubMode = 'kernel' | 'userspace';

export interface HubStatus {
  state: 'up' | 'down' | 'unavailable';
  mode: HubMode | null;
  /** What keeps the hub from running, in words an operator can act on; empty when it runs. */
  missing: string[];
  interface: InterfaceStatus | null;
}
