// What a Kubernetes call needs from an admin kubeconfig: the server, the cluster CA, the client
// identity and any bearer token. RezusCloud renders its kubeconfigs itself (inline data, one
// context); other forms a kubectl user might hand over (file paths, tokens, basic auth) are read
// too, and the ones that need a plugin or a proxy are refused by name instead of half-working.
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { ED25519_KEY_LABEL, toNodeKeyPem } from '../talos/pki.ts';

export interface KubeTarget {
  /** The server URL without credentials or trailing slash. */
  server: string;
  ca?: string;
  cert?: string;
  key?: string;
  /** Authorization header value (bearer token or basic), when the user has one. */
  authorization?: string;
  /** tls-server-name: the name the server certificate is checked against instead of the URL's host. */
  servername?: string;
  insecure: boolean;
}

type Fields = Record<string, unknown>;
interface Named {
  name?: string;
  cluster?: Fields;
  user?: Fields;
  context?: Fields;
}
interface Doc {
  clusters?: Named[];
  users?: Named[];
  contexts?: Named[];
  'current-context'?: string;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);

/** Inline base64 `<field>-data`, else the file named by `<field>`. */
function material(fields: Fields, field: string): string | undefined {
  const inline = str(fields[`${field}-data`]);
  if (inline) return Buffer.from(inline, 'base64').toString('utf8');
  const file = str(fields[field]);
  if (!file) return undefined;
  try {
    return readFileSync(file, 'utf8');
  } catch {
    throw new Error(`kubeconfig ${field} file could not be read`);
  }
}

function withoutCredentials(server: string): string {
  let u: URL;
  try {
    u = new URL(server);
  } catch {
    throw new Error('kubeconfig server is not a URL');
  }
  if (u.protocol !== 'https:') throw new Error('kubeconfig server must be an https:// URL');
  u.username = '';
  u.password = '';
  return u.toString().replace(/\/+$/, '');
}

function pick(list: Named[] | undefined, name: string | undefined): Named | undefined {
  return name === undefined ? list?.[0] : list?.find((e) => e.name === name);
}

export function readKubeconfig(kubeconfigYaml: string): KubeTarget {
  let doc: Doc;
  try {
    doc = (parse(kubeconfigYaml) ?? {}) as Doc;
  } catch {
    // The parser's message quotes the offending YAML, which may be key material.
    throw new Error('kubeconfig could not be parsed');
  }
  if (typeof doc !== 'object') throw new Error('kubeconfig could not be parsed');
  // A named context or cluster that is missing is an error, not a reason to fall back to the
  // first one: that could send the admin identity to another cluster.
  const context = pick(doc.contexts, str(doc['current-context']))?.context;
  if (!context && doc['current-context'] !== undefined) throw new Error('kubeconfig has no current cluster');
  const cluster = pick(doc.clusters, str(context?.cluster))?.cluster;
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const user = pick(doc.users, str(context?.user))?.user ?? {};
  if (str(cluster['proxy-url'])) throw new Error('kubeconfig proxy-url is not supported');
  if (user.exec || user['auth-provider']) throw new Error('kubeconfig exec and auth-provider credentials are not supported');

  const server = str(cluster.server);
  if (!server) throw new Error('kubeconfig cluster has no server');
  const target: KubeTarget = { server: withoutCredentials(server), insecure: cluster['insecure-skip-tls-verify'] === true };
  const ca = material(cluster, 'certificate-authority');
  const cert = material(user, 'client-certificate');
  const key = material(user, 'client-key');
  if (ca) target.ca = ca;
  if (cert) target.cert = cert;
  // Talos labels its Ed25519 keys in a form Node's TLS does not read.
  if (key) target.key = key.includes(`-----BEGIN ${ED25519_KEY_LABEL}-----`) ? toNodeKeyPem(key) : key;
  const servername = str(cluster['tls-server-name']);
  if (servername) target.servername = servername;

  let token = str(user.token);
  const tokenFile = str(user.tokenFile);
  if (!token && tokenFile) {
    try {
      token = readFileSync(tokenFile, 'utf8').trim();
    } catch {
      throw new Error('kubeconfig tokenFile could not be read');
    }
  }
  const username = str(user.username);
  const password = str(user.password);
  if (token) target.authorization = `Bearer ${token}`;
  else if (username && password) target.authorization = `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
  return target;
}
