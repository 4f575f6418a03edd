/**
 * The cluster of loop.mjs and timeline.mjs: two LoopWorker actors over one transport (a group of the
 * two where it needs one), and one call of their loop, `cluster.get(b.numel(a.make(bytes)))`, its refs
 * released by hand ("released") or left to the garbage collector ("natural").
 */
import { start } from "@tensorlane/core"
import { LoopWorker } from "./loopActors.mjs"

/** The transports it runs over, besides object-store. */
const modules = {
  gloo: "@tensorlane/transport-gloo",
  nixl: "@tensorlane/transport-nixl",
  shm: "@tensorlane/symmetric-mem",
  tcp: "@tensorlane-examples/transport-tcp",
  "tcp-effect": "@tensorlane-examples/transport-tcp/effect",
}

/** The transport modules a cluster over `transport` loads. */
export const transportModules = (transport) => (transport in modules ? [modules[transport]] : [])

/** Starts the cluster and its two actors: `a` makes, `b` consumes. The caller shuts it down. */
export const startLoop = async (transport, loop) => {
  if (loop !== "released" && loop !== "natural") throw new Error(`the loop is "released" or "natural", not "${loop}"`)
  const cluster = await start({ transports: transportModules(transport) })
  try {
    const [a, b] = await cluster.spawn(LoopWorker, { count: 2 })
    if (cluster.runtime.transport(transport).capabilities.needsGroup) await cluster.createCollectiveGroup([a, b], { backend: transport })
    return { cluster, a, b }
  } catch (error) {
    await cluster.shutdown()
    throw error
  }
}

/** One call of the loop, checked. */
export const loopCall = ({ cluster, a, b }, transport, bytes, loop) => {
  const make = a.make.options({ tensorTransport: transport })
  return loop === "natural"
    ? async () => {
        if ((await cluster.get(b.numel(make(bytes)))) !== bytes / 4) throw new Error("wrong count")
      }
    : async () => {
        const made = make(bytes)
        const numel = b.numel(made)
        if ((await cluster.get(numel)) !== bytes / 4) throw new Error("wrong count")
        made.release()
        numel.release()
      }
}
