import type { Command } from 'commander';
import { text } from 'node:stream/consumers';
import { ApiClient } from '../client.ts';
import { configPath, loadConfig, saveConfig } from '../config.ts';
import { usageError } from '../exit.ts';
import { renderTable } from '../output.ts';
import type { GlobalOptions } from '../session.ts';

/** Asks on the terminal without echoing: a token typed in should not stay on the screen. */
function promptHidden(prompt: string): Promise<string> {
  const stdin = process.stdin;
  process.stderr.write(prompt);
  stdin.setRawMode(true);
  stdin.setEncoding('utf8');
  stdin.resume();
  return new Promise((resolve) => {
    let value = '';
    const finish = () => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') {
          finish();
          return resolve(value);
        }
        // Raw mode swallows Ctrl-C's signal; honour it the usual way.
        if (ch === '\u0003') {
          finish();
          process.exit(130);
        }
        value = ch === '\u007f' ? value.slice(0, -1) : value + ch;
      }
    };
    stdin.on('data', onData);
  });
}

async function readToken(): Promise<string> {
  const token = (process.stdin.isTTY ? await promptHidden('token: ') : await text(process.stdin)).trim();
  if (!token) throw usageError('no token given (--token, stdin, or typed at the prompt)');
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
    .option('--token <token>', 'admin or tenant token (default: read from stdin, or asked for on a terminal)')
    .option('--name <name>', 'context name (default: the URL host)')
    .action(async (rawUrl: string, opts: { token?: string; name?: string }, cmd: Command) => {
      let url: URL;
      try {
        url = new URL(rawUrl);
      } catch {
        throw usageError(`"${rawUrl}" is not a URL (like http://localhost:8080)`);
      }
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw usageError(`${rawUrl}: use http:// or https://`);
      const token = opts.token ?? (await readToken());
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
