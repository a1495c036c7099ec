import type { FC } from 'hono/jsx';
import type { Json } from '../api.ts';
import { Csrf, Field, Layout, Time } from '../layout.tsx';
import { href, type FormValues, type View } from '../view.ts';

export const TenantsPage: FC<{ v: View; tenants: Json[]; error?: string | undefined; values?: FormValues }> = ({ v, tenants, error, values = {} }) => (
  <Layout v={v} title="Tenants" section="tenants" error={error}>
    <section aria-labelledby="tenants-h">
      <h2 id="tenants-h">All tenants</h2>
      {tenants.length === 0 ? (
        <p class="notice">No tenants yet.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {tenants.map((t) => (
                <tr>
                  <td>{String(t.name)}</td>
                  <td class="mono">{String(t.id)}</td>
                  <td>
                    <Time ms={t.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
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
