import { packageBuild } from "../../tsup.base.ts"

// `plugin` is the @tensorlane/core/plugin subpath; with splitting, it and the index share one copy of every module.
export default packageBuild({
  entry: { index: "src/index.ts", plugin: "src/plugin.ts", "actor-main": "src/internal/actorMain.ts", "agent-main": "src/internal/agentMain.ts" },
  dts: { entry: { index: "src/index.ts", plugin: "src/plugin.ts" } },
  external: [],
  splitting: true,
})
