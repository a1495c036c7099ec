#!/usr/bin/env node
import { CommanderError, type Command } from 'commander';
import { ApiFailure } from './client.ts';
import { CliError, EXIT } from './exit.ts';
import { buildProgram } from './program.ts';

function detailsLine(details: unknown): string {
  if (!details || typeof details !== 'object') return '';
  const d = details as Record<string, unknown>;
  if (typeof d.activeRun === 'string') return `\n  active run: ${d.activeRun} (rezus logs -f ${d.activeRun})`;
  return '';
}

async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  // Commander would exit 1 on a usage error; the documented code is 2.
  const override = (cmd: Command): void => {
    cmd.exitOverride();
    cmd.commands.forEach(override);
  };
  override(program);
  try {
    await program.parseAsync(argv);
    return Number(process.exitCode ?? 0);
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end with 0; help shown because a command was missing is a usage error.
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (err instanceof ApiFailure) {
      process.stderr.write(`error: ${err.message} (${err.code}, HTTP ${err.status})${detailsLine(err.details)}\n`);
      return err.exitCode;
    }
    if (err instanceof CliError) {
      process.stderr.write(`error: ${err.message}\n`);
      return err.exitCode;
    }
    process.stderr.write(`error: ${(err as Error).stack ?? String(err)}\n`);
    return EXIT.api;
  }
}

process.exitCode = await main(process.argv);
