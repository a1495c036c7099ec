export * from './core.ts';
export * from './state.ts';
