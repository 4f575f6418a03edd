import { defineConfig } from "tsup"

// Not bundled: actor processes import dist/internal/BenchActors.js by its own URL, and the limits
// fork dist/internal/TcpSink.js, so each module keeps its file.
export default defineConfig({
  entry: ["src/**/*.ts"],
  bundle: false,
  format: ["esm"],
  target: "node20",
  platform: "node",
  dts: { entry: "src/index.ts" },
  sourcemap: true,
  clean: true,
})
