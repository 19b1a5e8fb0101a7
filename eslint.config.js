// ESLint over src/, test/, bench/ and scripts/ (`npm run lint`, part of `make test`): ESLint's
// recommended rules and typescript-eslint's type-aware ones, with the project's tsconfig.json.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

export default defineConfig(
  { ignores: ['dist/', 'node_modules/', 'bench/results/', '.tap/', 'certs/'] },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // tap awaits the subtests it is given: `t.test(...)` needs no await of its own.
      '@typescript-eslint/no-floating-promises': ['error', { allowForKnownSafePromises: [{ from: 'package', package: '@tapjs/core', name: 'PromiseWithSubtest' }] }],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // Subtests are `async (t) => ...` whether or not they await yet, as tap's own examples write them.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // AdmissionReview and manifest fixtures: JSON that these tests reshape and index freely
    // (request.object.spec.template...), as the API server's JSON; typing each path would
    // restate the Kubernetes schema in every test.
    files: ['test/webhook/**/*.ts', 'test/lint/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    // Plain JavaScript preloaded into measured processes (bench/watcher/gc-probe.mjs: a TypeScript
    // file would load Node's type stripper into them): outside the TypeScript project.
    files: ['**/*.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: { process: 'readonly' } },
  },
);
