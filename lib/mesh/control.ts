// What the HTTP routes need from a host that runs the hub. The runner passes an implementation
// (lib/mesh/hub-driver.ts underneath); a host without one (Workers) only records desired state.
import type { HubStatus } from './hub-driver-types.ts';

export interface MeshHubControl {
  /** Renders the hub from the database and applies it; resolves with the interface state. */
  sync(): Promise<HubStatus>;
  status(): Promise<HubStatus>;
}
