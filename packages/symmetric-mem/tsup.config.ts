import { defineConfig } from "tsup"

export default defineConfig({
  entry: { index: "src/index.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  dts: { entry: "src/index.ts" },
  sourcemap: true,
  clean: true,
  // Resolved at run time in every process, so that all share one copy of core's error classes;
  // transport-nccl is an optional peer, imported only by the nccl-window backend.
  external: ["@tensorlane/core", "@tensorlane/transport-nccl"],
})
