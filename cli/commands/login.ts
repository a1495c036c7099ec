import type { Command } from 'commander';
import { text } from 'node:stream/consumers';
import { ApiClient } from '../client.ts';
import { configPath, loadConfig, saveConfig } from '../config.ts';
import { usageError } from '../exit.ts';
import { renderTable } from '../output.ts';
import type { GlobalOptions } from '../session.ts';

async function readTokenFromStdin(): Promise<string> {
  if (process.stdin.isTTY) throw usageError('give the token with --token, or pipe it on stdin (e.g. `rezus login URL < data/admin-token`)');
  const token = (await text(process.stdin)).trim();
  if (!token) throw usageError('no token on stdin');
  return token;
}

function contextNameOf(url: URL): string {
  return url.host.replace(/[[\]]/g, '');
}

export function registerLogin(program: Command): void {
  program
    .command('login')
    .description('store an API URL and token as a context and make it current (the token is checked first)')
    .argument('<url>', 'the RezusCloud API, e.g. http://localhost:8080')
    .option('--token <token>', 'admin or tenant token (default: read from stdin)')
    .option('--name <name>', 'context name (default: the URL host)')
    .action(async (rawUrl: string, opts: { token?: string; name?: string }, cmd: Command) => {
      let url: URL;
      try {
        url = new URL(rawUrl);
      } catch {
        throw usageError(`"${rawUrl}" is not a URL (like http://localhost:8080)`);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw usageError(`${rawUrl}: use http:// or https://`);
      const token = opts.token ?? (await readTokenFromStdin());
      const base = url.toString().replace(/\/+$/, '');
      // A wrong URL or token fails here, before anything is written.
      await new ApiClient(base, token).json('GET', '/v1/tenants');
      const path = configPath(cmd.optsWithGlobals<GlobalOptions>().config);
      const config = await loadConfig(path);
      const name = opts.name ?? contextNameOf(url);
      config.contexts[name] = { url: base, token };
      config.current = name;
      await saveConfig(path, config);
      console.log(`logged in to ${base}; context "${name}" is current (${path})`);
    });

  const context = program.command('context').description('list and switch the stored API contexts');
  context
    .command('list')
    .alias('ls')
    .description('list contexts; * marks the current one')
    .action(async (_opts: unknown, cmd: Command) => {
      const config = await loadConfig(configPath(cmd.optsWithGlobals<GlobalOptions>().config));
      const rows = Object.entries(config.contexts).map(([name, c]) => ({ name, url: c.url, current: name === config.current ? '*' : '' }));
      process.stdout.write(
        renderTable(rows, [
          { header: 'current', value: (r) => r.current },
          { header: 'name', value: (r) => r.name },
          { header: 'url', value: (r) => r.url },
        ]),
      );
    });
  context
    .command('use')
    .description('make a context current')
    .argument('<name>')
    .action(async (name: string, _opts: unknown, cmd: Command) => {
      const path = configPath(cmd.optsWithGlobals<GlobalOptions>().config);
      const config = await loadConfig(path);
      if (!config.contexts[name]) throw usageError(`no context named "${name}"; see \`rezus context list\``);
      config.current = name;
      await saveConfig(path, config);
      console.log(`context "${name}" is current`);
    });
  context
    .command('current')
    .description('print the current context name')
    .action(async (_opts: unknown, cmd: Command) => {
      const config = await loadConfig(configPath(cmd.optsWithGlobals<GlobalOptions>().config));
      if (!config.current) throw usageError('no current context; run `rezus login <url>`');
      console.log(config.current);
    });
  context
    .command('delete')
    .alias('rm')
    .description('forget a context and its token')
    .argument('<name>')
    .action(async (name: string, _opts: unknown, cmd: Command) => {
      const path = configPath(cmd.optsWithGlobals<GlobalOptions>().config);
      const config = await loadConfig(path);
      if (!config.contexts[name]) throw usageError(`no context named "${name}"`);
      delete config.contexts[name];
      if (config.current === name) delete config.current;
      await saveConfig(path, config);
      console.log(`context "${name}" deleted`);
    });
}
