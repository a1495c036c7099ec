import type { Child, FC, PropsWithChildren } from 'hono/jsx';
import { formatTime, href, type View } from './view.ts';

export type Section = 'clusters' | 'runs' | 'tenants' | 'audit' | 'backups' | 'api' | 'login' | 'none';

const NAV: Array<[Section, string, string]> = [
  ['clusters', 'Clusters', '/'],
  ['runs', 'Runs', '/runs'],
  ['tenants', 'Tenants', '/tenants'],
  ['audit', 'Audit', '/audit'],
  ['backups', 'Backups', '/backups'],
  ['api', 'API', '/api'],
];

export const Layout: FC<PropsWithChildren<{ v: View; title: string; section: Section; error?: string | undefined }>> = ({
  v,
  title,
  section,
  error,
  children,
}) => (
  <html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <title>{`${title} · RezusCloud`}</title>
      <link rel="stylesheet" href={href(v, '/assets/app.css')} />
    </head>
    <body>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={href(v, '/')}>
          RezusCloud
        </a>
        {v.principal && (
          <nav aria-label="Main">
            <ul>
              {NAV.filter(([key]) => v.principal?.admin || key !== 'backups').map(([key, label, path]) => (
                <li>
                  <a href={href(v, path)} aria-current={key === section ? 'page' : undefined}>
                    {label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        )}
        {v.principal && (
          <div class="who">
            <span>{v.ingress ? 'Home Assistant (admin)' : v.principal.admin ? 'Admin' : 'Tenant token'}</span>
            {!v.ingress && (
              <form method="post" action={href(v, '/logout')} class="inline">
                <Csrf v={v} />
                <button type="submit" class="secondary">
                  Log out
                </button>
              </form>
            )}
          </div>
        )}
      </header>
      <main id="main" tabindex={-1}>
        <h1>{title}</h1>
        {error && (
          <div class="alert" role="alert">
            <strong>Error:</strong> {error}
          </div>
        )}
        {children}
      </main>
    </body>
  </html>
);

export const Csrf: FC<{ v: View }> = ({ v }) => <input type="hidden" name="_csrf" value={v.csrf} />;

export const Field: FC<{
  id: string;
  name: string;
  label: string;
  value?: string | undefined;
  hint?: string;
  required?: boolean;
  placeholder?: string;
  type?: 'text' | 'password' | 'number';
  autocomplete?: string;
  /** The API's complaint about this field, shown under it. */
  error?: string | undefined;
}> = (p) => (
  <div class={p.error ? 'field invalid' : 'field'}>
    <label for={p.id}>
      {p.label}
      {p.hint && <span class="hint"> — {p.hint}</span>}
    </label>
    <input
      id={p.id}
      name={p.name}
      type={p.type ?? 'text'}
      value={p.value ?? ''}
      required={p.required}
      placeholder={p.placeholder}
      autocomplete={p.autocomplete ?? 'off'}
      spellcheck={false}
      aria-invalid={p.error ? 'true' : undefined}
      aria-describedby={p.error ? `${p.id}-error` : undefined}
    />
    {p.error && (
      <p class="field-error" id={`${p.id}-error`} role="alert">
        {p.error}
      </p>
    )}
  </div>
);

/**
 * The API names the field it rejects ("name: must be a DNS label"); this finds which field of a
 * form it means, so the message can stand next to it. Anything else stays a form-level error.
 */
export function errorFor(error: string | undefined, fields: string[]): { field?: string; message: string } | undefined {
  if (!error) return undefined;
  const m = /^([A-Za-z][\w.]*): (.+)$/s.exec(error);
  const field = m ? fields.find((f) => f === m[1] || m[1]!.startsWith(`${f}.`)) : undefined;
  return field ? { field, message: m![2]! } : { message: error };
}

export const Select: FC<{ id: string; name: string; label: string; options: Array<[string, string]>; value?: string | undefined; required?: boolean }> = (p) => (
  <div class="field">
    <label for={p.id}>{p.label}</label>
    <select id={p.id} name={p.name} required={p.required}>
      {p.options.map(([value, text]) => (
        <option value={value} selected={value === (p.value ?? '')}>
          {text}
        </option>
      ))}
    </select>
  </div>
);

/** A one-button form posting to a dashboard action. */
export const ActionButton: FC<PropsWithChildren<{ v: View; action: string; label: string; kind?: 'secondary' | 'danger'; id?: string }>> = ({
  v,
  action,
  label,
  kind,
  id,
  children,
}) => (
  <form method="post" action={href(v, action)} id={id}>
    <Csrf v={v} />
    {children}
    <button type="submit" class={kind}>
      {label}
    </button>
  </form>
);

export const Badge: FC<{ state: string; id?: string }> = ({ state, id }) => (
  <span class={`badge ${state}`} id={id}>
    {state}
  </span>
);

export const Time: FC<{ ms: number | null | undefined }> = ({ ms }) =>
  ms === null || ms === undefined ? <span>—</span> : <time datetime={new Date(ms).toISOString()}>{formatTime(ms)}</time>;

/**
 * A table that turns into one card per row on a narrow screen: `columns` head it, and each cell's
 * `data-label` names its column in the card.
 */
export const CardTable: FC<PropsWithChildren<{ columns: Child[]; id?: string; class?: string }>> = ({ columns, id, class: cls, children }) => (
  <div class="table-wrap cards">
    <table id={id} class={cls}>
      <thead>
        <tr>
          {columns.map((c) => (
            <th scope="col">{c}</th>
          ))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  </div>
);
