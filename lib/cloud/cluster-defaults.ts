// Settings a module gets from the cluster itself unless the user set them.
import { MODULE_VARIABLES } from './module-variables.ts';

type Settings = Record<string, Record<string, unknown> | undefined>;

/**
 * The Talos version feeds the AWS AMI lookup, so a new machine boots the release its config was
 * written for, not whatever Sidero Labs published last.
 */
export function withClusterDefaults<S extends Settings>(settings: S, cluster: { talosVersion: string }): S {
  const out: Settings = { ...settings };
  for (const [provider, vars] of Object.entries(MODULE_VARIABLES)) {
    if (vars.talos_version && out[provider]?.talos_version === undefined) {
      out[provider] = { ...out[provider], talos_version: cluster.talosVersion };
    }
  }
  return out as S;
}
