import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    pool: 'forks',
    // CI has 2 cores, which the integration servers (Temporal, MinIO, moto) share with the test workers.
    maxWorkers: 2,
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'] },
      },
      {
        extends: true,
        // The simulator runs its seeds in processes of its own (test/sim/runner.ts), on both cores.
        test: { name: 'sim', include: ['test/sim/**/*.test.ts'], testTimeout: 900_000 },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          setupFiles: ['test/setup/no-uncaught.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
