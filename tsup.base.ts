import { defineConfig, type Options } from "tsup"

/** The build of every tensorlane package: ESM for Node 20+, declarations, source maps; `options` adds to it. */
export const packageBuild = (options: Options = {}) =>
  defineConfig({
    entry: { index: "src/index.ts" },
    format: ["esm"],
    target: "node20",
    platform: "node",
    // Builtins keep their node: prefix: vitest's module runner does not take a bare "tls" for Node's.
    removeNodeProtocol: false,
    dts: { entry: "src/index.ts" },
    sourcemap: true,
    clean: true,
    // Resolved at run time in every process, so that all share one copy of core's error classes.
    external: ["@tensorlane/core"],
    ...options,
  })
