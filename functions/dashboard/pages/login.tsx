import type { FC } from 'hono/jsx';
import { Csrf, Layout } from '../layout.tsx';
import { href, type View } from '../view.ts';

export const LoginPage: FC<{ v: View; error?: string | undefined }> = ({ v, error }) => (
  <Layout v={v} title="Log in" section="login" error={error}>
    <form method="post" action={href(v, '/login')} class="card login">
      <Csrf v={v} />
      <div class="field">
        <label for="token">
          API token <span class="hint">— the admin token or a tenant token</span>
        </label>
        <input id="token" name="token" type="password" required autocomplete="off" spellcheck={false} />
      </div>
      <p class="hint">The token is kept sealed in an HttpOnly cookie for this browser session only.</p>
      <button type="submit">Log in</button>
    </form>
  </Layout>
);
