export { UPGRADE_KIND, upgradeExecutor, type UpgradeResult } from './executor.ts';
export { upgradeRoutes } from './routes.ts';
export { apiFor, defaultUpgradeImage, upgradeBatches, type UpgradeParams } from './plan.ts';
export { DEFAULT_UPGRADE_TIMINGS, type UpgradeTimings } from './timings.ts';
