// The runner's entry (`npm start`, `node dist/runner/main.js`). Node (22.1+) keeps the compiled
// code of the modules it loads on disk (NODE_COMPILE_CACHE, else under the temp dir), so later
// starts skip compiling them. It is enabled here, before anything else: a static import would be
// compiled before this line runs, so the runner itself is imported dynamically.
import nodeModule from 'node:module';

nodeModule.enableCompileCache?.();
await import('./launch.ts');
