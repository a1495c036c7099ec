import type { Command } from 'commander';
import { ApiClient } from './client.ts';
import { configPath, loadConfig, selectContext } from './config.ts';
import { parseFormat, type OutputFormat } from './output.ts';

export interface GlobalOptions {
  config?: string;
  context?: string;
  tenant?: string;
  output?: string;
}

/** The API client of the chosen context, and the options every command shares. */
export async function session(cmd: Command) {
  const opts = cmd.optsWithGlobals<GlobalOptions>();
  const config = await loadConfig(configPath(opts.config));
  const ctx = selectContext(config, opts.context);
  return { api: new ApiClient(ctx.url, ctx.token), ctx, opts, format: parseFormat(opts.output) as OutputFormat };
}

/** Human progress goes to stderr when stdout carries JSON or YAML for a program to read. */
export const progress = (format: OutputFormat) => (line: string) => (format === 'table' ? process.stdout : process.stderr).write(`${line}\n`);
