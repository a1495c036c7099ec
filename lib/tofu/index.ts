export { resolveTofuBinary, probeVersion, TofuBinaryNotFoundError } from './binary.ts';
export type { TofuBinary, TofuFlavor } from './binary.ts';
export type { TofuBackend } from './backend.ts';
export { runTofu, childEnv, pluginCacheDir } from './executor.ts';
export type { TofuExecOptions, TofuExecResult, TofuSubcommand } from './executor.ts';
export { parseTofuLine, toRunEvent, UnsupportedUiVersionError } from './messages.ts';
export type { RunEvent, TofuMessage } from './messages.ts';
export { Redactor, REDACTED } from './redact.ts';
export {
  TofuWorkspace,
  TofuCommandError,
  machineAddressesFrom,
  moduleDirFor,
  workDirFor,
  removeStaleRunFiles,
} from './workspace.ts';
export type { ApplyResult, CommandHooks, MachineAddresses, PlanResult, RunFiles, TofuOutput, TofuWorkspaceOptions } from './workspace.ts';
