// The cluster page's view of the WireGuard mesh (GET /v1/clusters/:id/mesh): what nodes dial, how
// each peer is doing, and what the STUN check advises; forms turn it on with an endpoint (or STUN),
// re-push waiting nodes and turn it off. A relay and the hub's prefixes are set through the API.
import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { ActionButton, Badge, CardTable, Csrf, errorFor, Field, Time } from '../layout.tsx';
import { href, type View } from '../view.ts';
import { formatBytes } from '../../../lib/bytes.ts';

const ms = (iso: unknown): number | null => (typeof iso === 'string' ? Date.parse(iso) : null);

const bytes = (n: unknown): string => formatBytes(typeof n === 'number' ? n : 0);

/** A peer's WireGuard session: no handshake yet, fresh, or older than WireGuard's 2-minute rekey plus slack. */
function session(latest: unknown, now: number): { state: string; label: string } {
  const at = ms(latest);
  if (at === null) return { state: 'none', label: 'no handshake' };
  return now - at <= 3 * 60_000 ? { state: 'up', label: 'up' } : { state: 'stale', label: 'stale' };
}

/** The endpoint form: on, or a new endpoint for a cluster already on the mesh. */
const EndpointForm: FC<{ v: View; cid: string; on: boolean; value: string | undefined; error: string | undefined }> = ({ v, cid, on, value, error }) => {
  const problem = errorFor(error, ['endpoint']);
  return (
    <form method="post" action={href(v, `/clusters/${cid}/mesh`)} class="card" id="mesh-form">
      <h3>{on ? 'Change what nodes dial' : 'Turn the mesh on'}</h3>
      <p class="hint">
        Every machine gets a WireGuard peer on the runner's hub and, with its next push, a config that dials it. A changed endpoint is pushed to the nodes that hold the old one.
      </p>
      <Csrf v={v} />
      {problem && !problem.field ? (
        <p class="field-error" role="alert">
          {problem.message}
        </p>
      ) : null}
      <div class="fields">
        <Field id="mesh-endpoint" name="endpoint" label="Endpoint" hint="the hub's public ip:port, or stun to learn it" placeholder="203.0.113.7:51820" value={value} error={problem?.field ? problem.message : undefined} required />
      </div>
      <button type="submit">{on ? 'Save endpoint' : 'Turn on'}</button>
    </form>
  );
};

export const MeshSection: FC<{ v: View; cid: string; mesh: Json | undefined; now: number; error?: string | undefined; endpoint?: string | undefined }> = ({
  v,
  cid,
  mesh,
  now,
  error,
  endpoint,
}) => {
  if (!mesh?.enabled) {
    return (
      <section aria-labelledby="mesh-h">
        <h2 id="mesh-h">Mesh</h2>
        <p class="notice" id="mesh-off">
          Off. Nodes behind NAT reach the runner's WireGuard hub once it is on.
        </p>
        <EndpointForm v={v} cid={cid} on={false} value={endpoint} error={error} />
      </section>
    );
  }
  const hubState = String(mesh.hub?.status?.state ?? 'unknown');
  const pending: Json[] = mesh.pending ?? [];
  const peers: Json[] = mesh.peers ?? [];
  return (
    <section aria-labelledby="mesh-h">
      <h2 id="mesh-h">Mesh</h2>
      <dl class="facts" id="mesh-facts">
        <dt>Nodes dial</dt>
        <dd class="mono">
          {mesh.relay ? `relay ${String(mesh.relay.address)} (ports from ${String(mesh.relay.nodePortBase)})` : mesh.endpoint ? String(mesh.endpoint) : 'no endpoint yet'}
          {mesh.endpointSource === 'stun' ? ' · learned with STUN' : ''}
        </dd>
        <dt>Hub</dt>
        <dd>
          <Badge state={hubState} /> <span class="mono">{String(mesh.hub?.interface ?? '')}</span> · UDP {String(mesh.hub?.listenPort ?? '')} ·{' '}
          <span class="mono">{String(mesh.hub?.ipv4 ?? '')}</span>
        </dd>
        {mesh.stun?.enabled || mesh.endpointSource === 'stun' ? (
          <>
            <dt>STUN</dt>
            <dd id="mesh-stun">
              {String(mesh.stun?.advice ?? '')}
              {mesh.stun?.checkedAt ? (
                <span class="hint">
                  {' '}
                  (checked <Time ms={ms(mesh.stun.checkedAt)} />)
                </span>
              ) : null}
            </dd>
          </>
        ) : null}
        {pending.length > 0 ? (
          <>
            <dt>Waiting for a re-push</dt>
            <dd id="mesh-pending">
              {pending.map((p) => String(p.name ?? p.machine)).join(', ')} {pending.length === 1 ? 'still dials' : 'still dial'} an old endpoint (a{' '}
              <span class="mono">mesh-repush</span> run moves {pending.length === 1 ? 'it' : 'them'})
            </dd>
          </>
        ) : null}
      </dl>
      {peers.length === 0 ? (
        <p class="notice">No peers yet: machines get one when they are added.</p>
      ) : (
        <CardTable id="mesh-peers" columns={['Machine', 'Overlay', 'Dials', 'Session', 'Last handshake', 'Received, sent']}>
          {peers.map((p) => (
            <tr>
              <td data-label="Machine">{String(p.name ?? p.machine)}</td>
              <td data-label="Overlay" class="mono addr">
                {String(p.ipv4 ?? '')}
                {p.ipv6 ? (
                  <>
                    <br />
                    {String(p.ipv6)}
                  </>
                ) : null}
              </td>
              <td data-label="Dials" class="mono addr">
                <span>
                  {p.dials ? String(p.dials) : '—'}
                  {p.deliveredEndpoint !== undefined && p.deliveredEndpoint !== p.dials ? <span class="hint"> (holds {p.deliveredEndpoint ? String(p.deliveredEndpoint) : 'no mesh config yet'})</span> : null}
                </span>
              </td>
              <td data-label="Session">
                <span class={`badge ${session(p.latestHandshake, now).state}`}>{session(p.latestHandshake, now).label}</span>
              </td>
              <td data-label="Last handshake">{p.latestHandshake ? <Time ms={ms(p.latestHandshake)} /> : 'never'}</td>
              <td data-label="Received, sent">
                {bytes(p.rxBytes)}, {bytes(p.txBytes)}
              </td>
            </tr>
          ))}
        </CardTable>
      )}
      <EndpointForm v={v} cid={cid} on={true} value={endpoint ?? (mesh.endpointSource === 'stun' ? 'stun' : (mesh.endpoint ?? undefined))} error={error} />
      {pending.length > 0 ? (
        <div class="actions">
          <ActionButton v={v} action={`/clusters/${cid}/mesh/repush`} label="Re-push waiting nodes" kind="secondary" id="mesh-repush" />
        </div>
      ) : null}
      <form method="post" action={href(v, `/clusters/${cid}/mesh/off`)} class="card danger-zone" id="mesh-turn-off">
        <h3>Turn the mesh off</h3>
        <Csrf v={v} />
        <p class="hint">
          The hub forgets this cluster's peers at once. Nodes keep dialling it until their next push; one the runner reaches only over the mesh (behind NAT) is out of reach
          from then on.
        </p>
        <button type="submit" class="danger">
          Turn the mesh off
        </button>
      </form>
    </section>
  );
};
