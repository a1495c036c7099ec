import type { FC } from 'hono/jsx';
import { Layout } from '../layout.tsx';
import { href, type View } from '../view.ts';
import type { Operation } from '../../openapi/operations.ts';

const AUTH: Record<Operation['auth'], string> = { bearer: 'bearer token', basic: 'run state credential', signature: 'webhook signature', none: 'none' };

/** The API reference: every operation of /openapi.json, grouped by tag. */
export const ApiReferencePage: FC<{ v: View; operations: Operation[] }> = ({ v, operations }) => {
  const tags = [...new Set(operations.map((o) => o.tag))];
  return (
    <Layout v={v} title="API reference" section="api">
      <p>
        The machine-readable description is <a href={href(v, '/openapi.json')}>/openapi.json</a> (OpenAPI 3.1), generated from the
        schemas the handlers validate with.
      </p>
      {tags.map((tag) => (
        <section aria-labelledby={`api-${tag}`}>
          <h2 id={`api-${tag}`}>{tag}</h2>
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Method</th>
                  <th scope="col">Path</th>
                  <th scope="col">What it does</th>
                  <th scope="col">Auth</th>
                </tr>
              </thead>
              <tbody>
                {operations
                  .filter((o) => o.tag === tag)
                  .map((o) => (
                    <tr>
                      <td class="mono">{o.method.toUpperCase()}</td>
                      <td class="mono">{o.path}</td>
                      <td>{o.summary}</td>
                      <td>{o.scope ? `${AUTH[o.auth]}, ${o.scope}` : AUTH[o.auth]}</td>
                    </tr>
                  ))}
              </tbody>
            </table>
          </div>
        </section>
      ))}
    </Layout>
  );
};
