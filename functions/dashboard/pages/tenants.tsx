import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { CardTable, Csrf, Field, Layout, Select, Time } from '../layout.tsx';
import { href, type FormValues, type View } from '../view.ts';

export const TenantsPage: FC<{ v: View; tenants: Json[]; error?: string | undefined; values?: FormValues }> = ({ v, tenants, error, values = {} }) => (
  <Layout v={v} title="Tenants" section="tenants" error={error}>
    <section aria-labelledby="tenants-h">
      <h2 id="tenants-h">All tenants</h2>
      {tenants.length === 0 ? (
        <p class="notice">No tenants yet.</p>
      ) : (
        <CardTable columns={['Name', 'Id', 'Created']}>
          {tenants.map((t) => (
            <tr>
              <td data-label="Name">
                <a href={href(v, `/tenants/${encodeURIComponent(t.id)}`)}>{String(t.name)}</a>
              </td>
              <td data-label="Id" class="mono">{String(t.id)}</td>
              <td data-label="Created">
                <Time ms={t.createdAt} />
              </td>
            </tr>
          ))}
        </CardTable>
      )}
    </section>
    {v.principal?.admin && (
      <section aria-labelledby="new-tenant-h">
        <h2 id="new-tenant-h">New tenant</h2>
        <form method="post" action={href(v, '/tenants')} class="card">
          <Csrf v={v} />
          <div class="fields">
            <Field id="tenant-name" name="name" label="Name" hint="a DNS label" value={values.name} required />
          </div>
          <button type="submit">Create tenant</button>
        </form>
      </section>
    )}
  </Layout>
);

const PROVIDER_KINDS: Array<[string, string]> = [
  ['hetzner', 'Hetzner'],
  ['oci', 'OCI'],
  ['openstack', 'OpenStack'],
  ['aws', 'AWS'],
];

/** One tenant: its tokens, its cloud credentials (names only; values are write-only) and its webhook secret. */
export const TenantPage: FC<{
  v: View;
  tenant: Json;
  tokens: Json[];
  providers: Json[];
  error?: string | undefined;
  failed?: string | undefined;
  created?: { label: string; secret: string } | undefined;
  values: FormValues;
}> = ({ v, tenant, tokens, providers, error, failed, created, values }) => {
  const tid = encodeURIComponent(tenant.id);
  const errorAt = (form: string) =>
    failed === form && error ? (
      <p class="field-error" role="alert">
        {error}
      </p>
    ) : null;
  return (
    <Layout v={v} title={`Tenant ${tenant.name}`} section="tenants" error={failed ? undefined : error}>
      {created && (
        <div class="notice secret" role="status">
          <p>
            <strong>{created.label}</strong> — copy it now; it is not shown again.
          </p>
          <input type="text" readonly value={created.secret} id="new-secret" aria-label={created.label} class="mono" />
        </div>
      )}
      <section aria-labelledby="tokens-h">
        <h2 id="tokens-h">API tokens</h2>
        {tokens.length === 0 ? (
          <p class="notice">No tokens.</p>
        ) : (
          <CardTable id="tokens" columns={['Name', 'Scopes', 'Created', <span class="sr-only">Revoke</span>]}>
            {tokens.map((t) => (
              <tr>
                <td data-label="Name">{String(t.name)}</td>
                <td data-label="Scopes">{(t.scopes as string[]).join(', ')}</td>
                <td data-label="Created">
                  <Time ms={t.createdAt} />
                </td>
                <td>
                  <form method="post" action={href(v, `/tenants/${tid}/tokens/${encodeURIComponent(t.id)}/delete`)}>
                    <Csrf v={v} />
                    <button type="submit" class="danger">
                      Revoke {String(t.name)}
                    </button>
                  </form>
                </td>
              </tr>
            ))}
          </CardTable>
        )}
        <form method="post" action={href(v, `/tenants/${tid}/tokens`)} class="card">
          <h3>New token</h3>
          <Csrf v={v} />
          {errorAt('token')}
          <div class="fields">
            <Field id="tok-name" name="name" label="Token name" value={failed === 'token' ? values.name : ''} required />
          </div>
          <fieldset class="scopes">
            <legend>Scopes</legend>
            {['read', 'write', 'secrets'].map((s) => (
              <span class="field check">
                <input id={`scope-${s}`} type="checkbox" name={`scope-${s}`} value="on" checked={s !== 'secrets'} />
                <label for={`scope-${s}`}>{s}</label>
              </span>
            ))}
          </fieldset>
          <button type="submit">Create token</button>
        </form>
      </section>

      <section aria-labelledby="prov-h">
        <h2 id="prov-h">Provider credentials</h2>
        {providers.length === 0 ? (
          <p class="notice">No credentials stored.</p>
        ) : (
          <ul class="plain" id="providers">
            {providers.map((p) => (
              <li>
                <strong>{String(p.provider)}</strong>: <span class="mono">{(p.names as string[] | undefined)?.join(', ') ?? ''}</span>
                <form method="post" action={href(v, `/tenants/${tid}/providers/${encodeURIComponent(p.provider)}/delete`)} class="inline">
                  <Csrf v={v} />
                  <button type="submit" class="secondary">
                    Remove
                  </button>
                </form>
              </li>
            ))}
          </ul>
        )}
        <form method="post" action={href(v, `/tenants/${tid}/providers`)} class="card">
          <h3>Set credentials</h3>
          <Csrf v={v} />
          {errorAt('provider')}
          <Select id="prov-kind" name="provider" label="Provider" options={PROVIDER_KINDS} value={failed === 'provider' ? values.provider : undefined} />
          <div class="field">
            <label for="prov-vars">
              Variables <span class="hint">— one NAME=value per line; replaces what is stored</span>
            </label>
            <textarea id="prov-vars" name="variables" rows={4} spellcheck={false} autocomplete="off"></textarea>
          </div>
          <button type="submit">Save credentials</button>
        </form>
      </section>

      <section aria-labelledby="hook-h">
        <h2 id="hook-h">Webhook secret</h2>
        <form method="post" action={href(v, `/tenants/${tid}/webhook-secret`)} class="card">
          <Csrf v={v} />
          {errorAt('webhook')}
          <p class="hint">Signs provision webhooks from CI. Creating a new one replaces the old one at once.</p>
          <button type="submit" class="secondary">
            Create or rotate the webhook secret
          </button>
        </form>
      </section>
    </Layout>
  );
};
