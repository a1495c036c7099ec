import { normalizeTalosVersion } from './versions.ts';

/** Image Factory schematic with no customization: sha256 of `customization: {}\n`. */
export const VANILLA_SCHEMATIC = '376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba';
export const FACTORY_REGISTRY = 'factory.talos.dev';

const SCHEMATIC_ID = /^[0-9a-f]{64}$/;
const PLATFORM = /^[a-z0-9]+(-[a-z0-9]+)*$/;

export function isSchematicId(value: string): boolean {
  return SCHEMATIC_ID.test(value);
}

export interface InstallerImageOptions {
  /**
   * e.g. `metal`, `aws`: gives the "unified" `<platform>-installer` name the factory UI shows for
   * Talos ≥ 1.10. Without it, the generic `installer` name (which the factory serves as metal).
   */
  platform?: string;
  secureboot?: boolean;
}

/**
 * The Image Factory platform of each place a machine can live. The generic `installer` is the
 * metal image: with `grubUseUKICmdline` an upgraded cloud VM would boot `talos.platform=metal`
 * and never read its cloud's metadata again, so every cloud gets its own installer. `local`
 * machines run nowhere; they keep the generic name.
 */
export const INSTALLER_PLATFORMS: Readonly<Record<string, string | undefined>> = {
  aws: 'aws',
  oci: 'oracle',
  openstack: 'openstack',
  hetzner: 'hcloud',
  metal: 'metal',
  local: undefined,
};

export function installerPlatform(provider: string | undefined): string | undefined {
  return provider === undefined ? undefined : INSTALLER_PLATFORMS[provider];
}

/** `factory.talos.dev/installer/<schematic>:<talos tag>` and its platform/secureboot variants. */
export function installerImage(schematic: string, talosVersion: string, options: InstallerImageOptions = {}): string {
  if (!isSchematicId(schematic)) throw new Error('schematic: must be a 64-character hex Image Factory schematic id');
  if (options.platform !== undefined && !PLATFORM.test(options.platform)) {
    throw new Error('platform: must be a lowercase platform name such as metal or aws');
  }
  const base = options.platform ? `${options.platform}-installer` : 'installer';
  const name = options.secureboot ? `${base}-secureboot` : base;
  return `${FACTORY_REGISTRY}/${name}/${schematic}:${normalizeTalosVersion(talosVersion)}`;
}
