import { configDefaults, defineConfig } from "vitest/config"

// One project per package plus the multi-process scenarios under test/.
export default defineConfig({
  test: {
    reporters: ["default", "./tools/summaryReporter.ts"],
    projects: [
      {
        test: {
          name: "core",
          root: "packages/core",
          include: ["test/**/*.test.ts"],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: "integration",
          root: "test",
          include: ["**/*.test.ts"],
          // TENSORLANE_TEST_ONE_HOST=1 leaves out the multi-host scenarios (CI's second run, on Node 24, to stay within its time).
          exclude: [...configDefaults.exclude, "consumer/**", ...(process.env.TENSORLANE_TEST_ONE_HOST === "1" ? ["multihost/**"] : [])],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          // The packages as a user installs them, from a local registry (issue #23): one file, its steps in order.
          name: "consumer",
          root: "test/consumer",
          include: ["*.test.ts"],
          pool: "forks",
          testTimeout: 300_000,
          hookTimeout: 300_000,
        },
      },
      {
        test: {
          name: "transport-gloo",
          root: "packages/transport-gloo",
          include: ["test/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "transport-nixl",
          root: "packages/transport-nixl",
          include: ["test/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: "transport-nccl",
          root: "packages/transport-nccl",
          include: ["test/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          // NCCL and the CUDA runtime load once per process: the files that load the real wheel
          // libraries and those that load the test doubles must not share one.
          pool: "forks",
          isolate: true,
          env: { NCCL_SOCKET_IFNAME: "lo" },
        },
      },
      {
        test: {
          name: "symmetric-mem",
          root: "packages/symmetric-mem",
          include: ["test/**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          // The GPU check bundle's dry run (tools/gpu): builds the bundle and starts it.
          name: "tools",
          root: "tools",
          include: ["**/*.test.ts"],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: "cli",
          root: "packages/cli",
          include: ["test/**/*.test.ts"],
          testTimeout: 120_000,
          fileParallelism: false,
        },
      },
    ],
  },
})
