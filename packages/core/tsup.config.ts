import { packageBuild } from "../../tsup.base.ts"

export default packageBuild({
  entry: { index: "src/index.ts", "actor-main": "src/internal/actorMain.ts", "agent-main": "src/internal/agentMain.ts" },
  external: [],
  splitting: true,
})
