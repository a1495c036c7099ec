export { pushConfigRoutes } from './routes.ts';
export { PUSH_CONFIG_KIND, pushConfigExecutor, type PushConfigParams, type PushConfigResult } from './executor.ts';
export { BOOTSTRAP_KIND, bootstrapExecutor, type BootstrapParams } from './bootstrap.ts';
export { APPLIED, CONFIGURED, mayBeInMaintenance, readyForBootstrap } from './machine-state.ts';
export { DEFAULT_PUSH_TIMINGS, pushTimings } from './timings.ts';
