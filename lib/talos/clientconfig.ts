// Admin credentials for the Talos API and the Kubernetes API, and the client config files that carry them.
import { stringify } from 'yaml';
import { issueLeaf, toNodeKeyPem } from './pki.ts';
import { pemToBase64 } from './pem.ts';
import type { ClusterSecrets } from './secrets.ts';
import { endpointSchema } from './validate.ts';

/** PEM material for an mTLS client; `keyPem` is in a form Node's TLS loads. */
export interface ClientCredentials {
  caPem: string;
  certPem: string;
  keyPem: string;
}

interface Issued {
  caPem: string;
  certPem: string;
  /** as Talos/Go tools write it (Ed25519 under `ED25519 PRIVATE KEY`) */
  talosKeyPem: string;
}

async function issueTalosAdmin(secrets: ClusterSecrets): Promise<Issued> {
  const leaf = await issueLeaf({ ca: secrets.certs.os, usage: 'client', subject: { organizations: ['os:admin'] } });
  return { caPem: secrets.certs.os.certPem, certPem: leaf.certPem, talosKeyPem: leaf.keyPem };
}

async function issueKubeAdmin(secrets: ClusterSecrets): Promise<Issued> {
  const leaf = await issueLeaf({
    ca: secrets.certs.k8s,
    usage: 'client',
    subject: { organizations: ['system:masters'], commonName: 'admin' },
  });
  return { caPem: secrets.certs.k8s.certPem, certPem: leaf.certPem, talosKeyPem: leaf.keyPem };
}

/** A fresh Talos API admin client certificate (O=os:admin, 1 year) signed by the cluster's OS CA. */
export async function talosAdminCredentials(secrets: ClusterSecrets): Promise<ClientCredentials> {
  const issued = await issueTalosAdmin(secrets);
  return { caPem: issued.caPem, certPem: issued.certPem, keyPem: toNodeKeyPem(issued.talosKeyPem) };
}

/** A fresh Kubernetes admin client certificate (CN=admin, O=system:masters) signed by the cluster's Kubernetes CA. */
export async function kubeAdminCredentials(secrets: ClusterSecrets): Promise<ClientCredentials> {
  const issued = await issueKubeAdmin(secrets);
  return { caPem: issued.caPem, certPem: issued.certPem, keyPem: toNodeKeyPem(issued.talosKeyPem) };
}

const ENDPOINT_ENTRY = /^[^\s/,]+$/;

function checkList(field: string, values: string[], allowEmpty: boolean): string[] {
  if (!allowEmpty && values.length === 0) throw new Error(`${field}: must list at least one entry`);
  values.forEach((value, index) => {
    if (!ENDPOINT_ENTRY.test(value)) throw new Error(`${field}[${index}]: must be a host or host:port`);
  });
  return [...values];
}

export interface TalosconfigInput {
  clusterName: string;
  /** apid endpoints the client dials (`10.0.0.2`, `cp.example:50000`, `[2001:db8::1]:50000`) */
  endpoints: string[];
  /** default target nodes */
  nodes?: string[];
  secrets: ClusterSecrets;
}

/** A talosconfig (talosctl client config) with one context named after the cluster. */
export async function renderTalosconfig(input: TalosconfigInput): Promise<string> {
  if (!input.clusterName) throw new Error('clusterName: is required');
  const endpoints = checkList('endpoints', input.endpoints, false);
  const nodes = checkList('nodes', input.nodes ?? [], true);
  const issued = await issueTalosAdmin(input.secrets);
  const context: Record<string, unknown> = { endpoints };
  if (nodes.length > 0) context.nodes = nodes;
  context.ca = pemToBase64(issued.caPem);
  context.crt = pemToBase64(issued.certPem);
  context.key = pemToBase64(issued.talosKeyPem);
  return stringify({ context: input.clusterName, contexts: { [input.clusterName]: context } }, { lineWidth: 0 });
}

export interface KubeconfigInput {
  clusterName: string;
  /** the Kubernetes API endpoint, `https://host:port` */
  endpoint: string;
  secrets: ClusterSecrets;
}

/** The API server URL an admin kubeconfig names for the cluster's endpoint; throws when it is not one. */
export function kubeServerOf(endpoint: string): string {
  const server = endpointSchema.safeParse(endpoint);
  if (!server.success) throw new Error('endpoint: must be https://host:port (IPv6 as [addr])');
  return server.data;
}

/** An admin kubeconfig in the layout Talos produces (`admin@<cluster>` user and context). */
export async function renderKubeconfig(input: KubeconfigInput): Promise<string> {
  if (!input.clusterName) throw new Error('clusterName: is required');
  const server = kubeServerOf(input.endpoint);
  const issued = await issueKubeAdmin(input.secrets);
  const user = `admin@${input.clusterName}`;
  return stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: input.clusterName,
          cluster: { server, 'certificate-authority-data': pemToBase64(issued.caPem) },
        },
      ],
      users: [
        {
          name: user,
          user: {
            'client-certificate-data': pemToBase64(issued.certPem),
            'client-key-data': pemToBase64(issued.talosKeyPem),
          },
        },
      ],
      contexts: [{ name: user, context: { cluster: input.clusterName, namespace: 'default', user } }],
      'current-context': user,
      preferences: {},
    },
    { lineWidth: 0 },
  );
}
