import { defineConfig } from "tsup"

export default defineConfig({
  entry: { index: "src/index.ts", "actor-main": "src/internal/actorMain.ts", "agent-main": "src/internal/agentMain.ts" },
  format: ["esm"],
  target: "node20",
  platform: "node",
  dts: { entry: "src/index.ts" },
  sourcemap: true,
  clean: true,
  splitting: true,
})
