// Talos v1.13.9's rules across documents, which no JSON schema can state: without them a config
// that ApplyConfiguration (or first boot via user_data) refuses would only fail on the node.
import type { ConfigDocument } from './patch.ts';
import { documentLabel, isV1Alpha1 } from './schema.ts';
import type { FieldIssue } from './validate.ts';

/**
 * Kinds implementing config.NamedDocument at v1.13.9: only these carry `name` in their id, so two
 * unnamed documents of one kind (two HostnameConfigs) are duplicates whatever else they hold.
 */
const NAMED_KINDS: ReadonlySet<string> = new Set([
  // types/block
  'ExistingVolumeConfig',
  'ExternalVolumeConfig',
  'RawVolumeConfig',
  'SwapVolumeConfig',
  'UserVolumeConfig',
  'VolumeConfig',
  // types/cri
  'RegistryAuthConfig',
  'RegistryMirrorConfig',
  'RegistryTLSConfig',
  // types/hardware
  'PCIDriverRebindConfig',
  // types/network
  'BlackholeRouteConfig',
  'BondConfig',
  'BridgeConfig',
  'DHCPv4Config',
  'DHCPv6Config',
  'DummyLinkConfig',
  'EthernetConfig',
  'HCloudVIPConfig',
  'Layer2VIPConfig',
  'LinkAliasConfig',
  'LinkConfig',
  'NetworkRuleConfig',
  'RoutingRuleConfig',
  'StaticHostConfig',
  'TCPProbeConfig',
  'VLANConfig',
  'VRFConfig',
  'WireguardConfig',
  // types/runtime (ExtensionServiceConfig's Name() is its `name` field too)
  'ExtensionServiceConfig',
  'KmsgLogConfig',
  // types/security
  'TrustedRootsConfig',
]);

/**
 * ConflictsWithKinds at v1.13.9. Each kind lists the others of its group, so the relation is
 * symmetric and a group is enough: one name can belong to one kind of the group only (a link name
 * is one link, a volume is either created or adopted, a VIP is announced one way).
 */
const CONFLICT_GROUPS: readonly (readonly string[])[] = [
  // types/network/link.go conflictingLinkKinds
  ['BondConfig', 'BridgeConfig', 'DummyLinkConfig', 'LinkConfig', 'VLANConfig', 'VRFConfig', 'WireguardConfig'],
  // types/block/user_volume_config.go, existing_volume_config.go
  ['UserVolumeConfig', 'ExistingVolumeConfig'],
  // types/network/layer2_vip.go, hcloud_vip.go
  ['Layer2VIPConfig', 'HCloudVIPConfig'],
];

const MAX_FQDN_BYTES = 253;
const MAX_LABEL_BYTES = 63;

/**
 * The id Talos compares documents by, as its Validate errors write it: `HostnameConfig`,
 * `LinkConfig/eth0` (container.New's own errors add a `/` after an unnamed kind).
 */
export function documentId(kind: string, doc: ConfigDocument): string {
  if (!NAMED_KINDS.has(kind)) return kind;
  // A missing name is Go's empty string: the schema reports it, the id still collides.
  return `${kind}/${typeof doc.name === 'string' ? doc.name : ''}`;
}

interface SeenDocument {
  kind: string;
  id: string;
  name: unknown;
}

function conflicts(a: SeenDocument, b: SeenDocument): boolean {
  const group = CONFLICT_GROUPS.find((g) => g.includes(a.kind));
  return a.kind !== b.kind && group !== undefined && group.includes(b.kind) && a.name === b.name;
}

/**
 * container.New (pkg/machinery/config/container/container.go): one v1alpha1 document, unique ids,
 * no two kinds of a conflict group under one name. Talos stops at the first; every one is reported
 * here so a user fixes them in one go. The issue sits on the later document, as Talos names it second.
 */
export function containerIssues(docs: ConfigDocument[]): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const seen: SeenDocument[] = [];
  let v1alpha1Seen = false;
  for (const doc of docs) {
    if (isV1Alpha1(doc)) {
      if (v1alpha1Seen) issues.push({ path: 'v1alpha1', message: 'duplicate v1alpha1.Config' });
      v1alpha1Seen = true;
      continue;
    }
    // Without a string kind the schema already refuses it, and Talos would not decode it.
    if (typeof doc.kind !== 'string') continue;
    const current: SeenDocument = { kind: doc.kind, id: documentId(doc.kind, doc), name: doc.name };
    const path = documentLabel(doc);
    const earlier = seen.find((s) => s.id === current.id) ?? seen.find((s) => conflicts(s, current));
    if (earlier?.id === current.id) {
      issues.push({ path, message: `duplicate document: ${current.id}` });
    } else if (earlier) {
      issues.push({ path, message: `conflicting documents: ${earlier.id} and ${current.id} (use another name, or patch ${earlier.id} instead)` });
    }
    seen.push(current);
  }
  return issues;
}

/** Go's len(): Talos limits hostnames in bytes. */
const byteLength = (text: string): number => new TextEncoder().encode(text).length;

/**
 * HostnameConfigV1Alpha1.Validate (pkg/machinery/config/types/network/hostname.go). An unset
 * `auto` is Go's zero value, `off`, so only another value clashes with a hostname. The `auto`
 * enum (stable, off) is the schema's, not repeated here.
 */
export function hostnameConfigIssues(doc: ConfigDocument): FieldIssue[] {
  const label = documentLabel(doc);
  const auto = doc.auto;
  // Go reads an empty hostname as unset; a non-string one fails the schema and is left to it.
  const hostnameSet = doc.hostname !== undefined && doc.hostname !== '';
  const issues: FieldIssue[] = [];
  if (auto === undefined && !hostnameSet) {
    issues.push({ path: label, message: "either 'auto' or 'hostname' must be set (auto: stable lets Talos pick the hostname)" });
  }
  if (auto !== undefined && auto !== 'off' && hostnameSet) {
    issues.push({
      path: label,
      message: "'auto' and 'hostname' cannot be set at the same time; add auto: null to the patch to keep the hostname, or hostname: null to use auto",
    });
  }
  if (typeof doc.hostname === 'string' && hostnameSet) {
    if (byteLength(doc.hostname) > MAX_FQDN_BYTES) {
      issues.push({ path: `${label}.hostname`, message: `must be at most ${MAX_FQDN_BYTES} bytes` });
    }
    const first = byteLength(doc.hostname.split('.')[0] as string);
    if (first === 0 || first > MAX_LABEL_BYTES) {
      issues.push({ path: `${label}.hostname`, message: `must start with a label of 1-${MAX_LABEL_BYTES} bytes` });
    }
  }
  return issues;
}

/** Everything Talos checks across and within documents beyond the schema and the v1alpha1 rules. */
export function multiDocIssues(docs: ConfigDocument[]): FieldIssue[] {
  return [...containerIssues(docs), ...docs.filter((d) => d.kind === 'HostnameConfig').flatMap(hostnameConfigIssues)];
}
