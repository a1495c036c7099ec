export * from './core.ts';
export * from './state.ts';
export * from './provision.ts';
export * from './health.ts';
export * from './sessions.ts';
export * from './etcd.ts';
export * from './edge.ts';
export * from './mesh.ts';
