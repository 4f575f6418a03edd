import { packageBuild } from "../../tsup.base.ts"

// `plugin` and `native` are the @tensorlane/core/plugin and /native subpaths; with splitting, they and the index share one copy of every module.
export default packageBuild({
  entry: { index: "src/index.ts", plugin: "src/plugin.ts", native: "src/native.ts", "actor-main": "src/internal/actorEntry.ts", "agent-main": "src/internal/agentEntry.ts", "lease-main": "src/internal/driver/leaseMain.ts" },
  dts: { entry: { index: "src/index.ts", plugin: "src/plugin.ts", native: "src/native.ts" } },
  external: [],
  splitting: true,
})
