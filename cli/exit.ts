/** The exit codes `rezus` documents (cli/README.md); scripts branch on them. */
export const EXIT = {
  ok: 0,
  /** a run the command waited for (or followed) ended `failed` */
  runFailed: 1,
  /** bad arguments, a spec that does not parse, a missing login */
  usage: 2,
  /** the API refused the request or could not be reached */
  api: 3,
  /** a run the command waited for ended `canceled` or `interrupted` */
  runCanceled: 4,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error the CLI reports as one line on stderr and turns into its exit code. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(EXIT.usage, message);
