/**
 * nixl and gloo in the same actors: NIXL's agent starts as an actor starts (the transport's
 * prepare), and UCX then hooks every library loaded after it, gloo's addon and its libraries
 * included. Both transports must go on moving the right bytes.
 */
import { start } from "@tensorlane/core"
import { describe, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"

const LARGE = 1 << 20

describe("an actor that has NIXL's agent loads gloo", () => {
  it("creates a gloo group after a nixl transfer, and moves bytes over both, alternately", async () => {
    const cluster = await start({ transports: ["@tensorlane/transport-nixl", "@tensorlane/transport-gloo"] })
    try {
      const [a, b] = await cluster.spawn(Helper, { count: 2 })
      expect(await cluster.get(b.numel(a.make.options({ tensorTransport: "nixl" })(LARGE)))).toBe(LARGE / 4)
      await cluster.createCollectiveGroup([a, b], { backend: "gloo" })
      for (let i = 0; i < 3; i++) {
        expect(await cluster.get(b.sum(a.make.options({ tensorTransport: "gloo" })(LARGE)))).toBe(LARGE / 4)
        expect(await cluster.get(b.sum(a.make.options({ tensorTransport: "nixl" })(LARGE)))).toBe(LARGE / 4)
      }
    } finally {
      await cluster.shutdown()
    }
  }, 60_000)
})
