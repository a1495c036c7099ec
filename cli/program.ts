import { Command, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { registerApply } from './commands/apply.ts';
import { registerClientConfigs } from './commands/configs.ts';
import { KIND_WORDS, registerGet } from './commands/get.ts';
import { registerLogin } from './commands/login.ts';
import { registerRunCommands } from './commands/runs.ts';
import { completionScript } from './completion.ts';
import { usageError } from './exit.ts';

const EXIT_HELP = `
Exit codes:
  0  success (with --wait or logs -f: the run succeeded)
  1  the run failed
  2  usage error: bad arguments, an invalid spec file, not logged in
  3  the API refused the request (its message is shown) or could not be reached
  4  the run was canceled or interrupted
  130  stopped with Ctrl-C while following a run (the run goes on)
`;

/** The package's version: package.json is one level up from the source and two from dist/cli/. */
function packageVersion(): string {
  for (let dir = import.meta.dirname, i = 0; i < 3; i++, dir = dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'rezuscloud' && pkg.version) return pkg.version;
    } catch {
      // not here; look one level up
    }
  }
  return 'unknown';
}

/** The whole command tree; `main.ts` runs it, the completion script is generated from it. */
export function buildProgram(): Command {
  const program = new Command('rezus')
    .description('RezusCloud from the terminal: contexts, inventory, runs, and clusters declared in files')
    .version(packageVersion(), '--version')
    .option('--config <path>', 'config file (default: $REZUS_CONFIG or ~/.config/rezus/config.yaml)')
    .option('--context <name>', 'use this context instead of the current one')
    .option('--tenant <tenant>', 'tenant name or id, when a cluster name exists in several tenants')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json', 'yaml']))
    .showHelpAfterError('(add --help for usage)')
    .addHelpText('after', EXIT_HELP);

  registerLogin(program);
  registerGet(program);
  registerApply(program);
  registerRunCommands(program);
  registerClientConfigs(program);

  program
    .command('completion')
    .description('print a shell completion script: `source <(rezus completion bash)`, or for zsh put `rezus completion zsh` in a file on $fpath named _rezus')
    .argument('<shell>', 'bash or zsh')
    .action((shell: string) => {
      if (shell !== 'bash' && shell !== 'zsh') throw usageError(`completion for "${shell}": use bash or zsh`);
      const choices = { get: KIND_WORDS, describe: KIND_WORDS, completion: ['bash', 'zsh'] };
      process.stdout.write(completionScript(program, shell, choices));
    });

  // Every subcommand gets the same help footer and the program's usage-error behaviour.
  const configure = (cmd: Command) => {
    for (const c of cmd.commands) {
      c.showHelpAfterError('(add --help for usage)');
      configure(c);
    }
  };
  configure(program);
  return program;
}
