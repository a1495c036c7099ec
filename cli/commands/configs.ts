import type { Command } from 'commander';
import { access } from 'node:fs/promises';
import { defaultKubeconfigPath, defaultTalosconfigPath, mergeKubeconfig, mergeTalosconfig, writePrivate } from '../clientconfigs.ts';
import { usageError } from '../exit.ts';
import { resolveCluster } from '../resolve.ts';
import { session } from '../session.ts';

interface ConfigOptions {
  merge?: boolean;
  force?: boolean;
}

const exists = (p: string) => access(p).then(() => true, () => false);

function register(program: Command, name: 'talosconfig' | 'kubeconfig', what: string, defaultPath: () => string, merge: (path: string, text: string) => Promise<{ context: string }>, envName: string, fallback: string) {
  program
    .command(name)
    .description(`fetch an admin ${what} for a cluster (a fresh client certificate; needs secrets:read)`)
    .argument('<cluster>', 'cluster name or id')
    .argument('[file]', `write it to this file (0600) instead of stdout`)
    .option('-m, --merge', `merge it into ${envName} (else ${fallback}), keeping every other context, and make it current`)
    .option('--force', 'overwrite [file] if it exists')
    .action(async (ref: string, file: string | undefined, opts: ConfigOptions, cmd: Command) => {
      if (opts.merge && file) throw usageError(`--merge writes to ${envName} or ${fallback}; drop [file] (or set ${envName})`);
      const { api, opts: g } = await session(cmd);
      const cluster = await resolveCluster(api, ref, g.tenant);
      const text = await api.text(`/v1/clusters/${cluster.id}/${name}`, { accept: 'application/yaml' });
      if (opts.merge) {
        const path = defaultPath();
        const { context } = await merge(path, text);
        console.log(`merged into ${path}; current context: ${context}`);
      } else if (file) {
        if (!opts.force && (await exists(file))) throw usageError(`${file} exists: add --force to overwrite it, or --merge`);
        await writePrivate(file, text);
        console.log(`wrote ${file}`);
      } else {
        process.stdout.write(text);
      }
    });
}

export function registerClientConfigs(program: Command): void {
  register(program, 'talosconfig', 'talosconfig (os:admin)', defaultTalosconfigPath, mergeTalosconfig, '$TALOSCONFIG', '~/.talos/config');
  register(program, 'kubeconfig', 'kubeconfig (system:masters)', defaultKubeconfigPath, mergeKubeconfig, '$KUBECONFIG', '~/.kube/config');
}
