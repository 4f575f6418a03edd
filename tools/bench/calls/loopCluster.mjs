/**
 * The cluster of loop.mjs and timeline.mjs: two LoopWorker actors over one transport (a group of the
 * two where it needs one), and one call of their loop, `cluster.get(b.numel(a.make(bytes)))`, its refs
 * released by hand ("released") or left to the garbage collector ("natural"). LOOP_ACTOR_FLAGS: Node
 * and V8 flags for the actors, space-separated (for instance "--trace-opt --trace-deopt").
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
  const cluster = await start({ transports: transportModules(transport), execArgv: (process.env.LOOP_ACTOR_FLAGS ?? "").split(" ").filter(Boolean) })
  try {
    const [a, b] = await cluster.spawn(LoopWorker, { count: 2 })
    if (cluster.runtime.transport(transport).capabilities.needsGroup) await cluster.createCollectiveGroup([a, b], { backend: transport })
    return { cluster, a, b }
  } catch (error) {
    await cluster.shutdown()
    throw error
  }
}

/**
 * One call of the loop, checked. `to` is who reads the result: "actor", the consumer's method
 * (`cluster.get(b.numel(made))`), or "driver", the program itself (`cluster.get(made)`, through the
 * object store where the transport is two-sided).
 */
export const loopCall = ({ cluster, a, b }, transport, bytes, loop, to = "actor") => {
  if (to !== "actor" && to !== "driver") throw new Error(`the result goes to "actor" or "driver", not "${to}"`)
  const make = a.make.options({ tensorTransport: transport })
  const check = (count) => {
    if (count !== bytes / 4) throw new Error("wrong count")
  }
  if (to === "driver") {
    const options = cluster.runtime.transport(transport).capabilities.oneSided ? {} : { useObjectStore: true }
    const read = async (made) => (await cluster.get(made, options)).numel
    return loop === "natural"
      ? async () => check(await read(make(bytes)))
      : async () => {
          const made = make(bytes)
          check(await read(made))
          made.release()
        }
  }
  return loop === "natural"
    ? async () => check(await cluster.get(b.numel(make(bytes))))
    : async () => {
        const made = make(bytes)
        const numel = b.numel(made)
        check(await cluster.get(numel))
        made.release()
        numel.release()
      }
}
