import { packageBuild } from "../../tsup.base.ts"

export default packageBuild({
  entry: { index: "src/index.ts", native: "src/native.ts", "actor-main": "src/internal/actorMain.ts", "agent-main": "src/internal/agentMain.ts" },
  dts: { entry: { index: "src/index.ts", native: "src/native.ts" } },
  external: [],
  splitting: true,
})
