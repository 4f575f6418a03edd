import { packageBuild } from "../../tsup.base.ts"

// Not bundled: actor processes import dist/internal/BenchActors.js by its own URL, and the limits
// fork dist/internal/TcpSink.js, RawGlooPeer.js, RawNixlPeer.js and RingPeer.js, so each module keeps its file.
export default packageBuild({ entry: ["src/**/*.ts"], bundle: false, external: [] })
