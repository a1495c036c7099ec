import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Built-ins workerd offers under nodejs_compat; every other node: module is Node-only.
const PORTABLE_NODE = ['node:crypto', 'node:events', 'node:buffer'];
const NODE_ONLY = {
  patterns: [
    {
      regex: `^node:(?!(${PORTABLE_NODE.map((m) => m.slice(5)).join('|')})$)`,
      message: 'Node-only built-in: portable code runs on Workers too; move this to runner/ (or lib/ code only the runner imports).',
      allowTypeImports: true,
    },
    {
      regex: '^(execa|@grpc/|@hono/node-server|croner|ajv$|ajv/dist/(2020|core)|ajv-formats$|@libsql/client(/node)?$|prom-client)',
      message: 'Node-only package: portable code reaches it through an interface in its context, never by import.',
      allowTypeImports: true,
    },
    { regex: '(^|/)runner/', message: 'functions/ and lib/ never import runner/: the runner assembles them, not the other way round.' },
    { regex: '(^|/)db/client\\.ts$', message: 'db/client.ts opens a Node database; take the database from the context.', allowTypeImports: true },
  ],
};
// lib/ folders that only the runner uses; they may use Node.
const NODE_LIB = ['lib/tofu/**', 'lib/kube/**', 'lib/talos/api/**', 'lib/crypto/master-key.ts', 'lib/mesh/hub-driver.ts', 'lib/mesh/relay.ts', 'lib/mesh/relay-main.ts', 'lib/mesh/stun.ts', 'lib/log.ts', 'lib/dial-guard.ts'];

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'dist/', 'db/migrations/', 'test/screenshots/', '.wrangler/', '**/.wrangler/', 'lib/talos/schema/validators.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
    },
  },
  {
    files: ['functions/**/*.{ts,tsx}'],
    rules: { '@typescript-eslint/no-restricted-imports': ['error', NODE_ONLY] },
  },
  {
    files: ['lib/**/*.ts'],
    ignores: NODE_LIB,
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { patterns: [...NODE_ONLY.patterns, { regex: '(^|/)functions/', message: 'lib/ never imports functions/: domain code does not know about HTTP handlers.' }] },
      ],
    },
  },
  {
    files: NODE_LIB,
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: '(^|/)(functions|runner)/', message: 'lib/ never imports functions/ or runner/.' },
            { regex: '^@grpc/grpc-js$', message: 'grpc-js serves the simulators only (a devDependency); the product speaks gRPC through lib/talos/api/node-channel.ts.' },
          ],
        },
      ],
    },
  },
);
