/**
 * ObjectRef alone, with a tracker that records what the ref asks of it: one acquire when made, one
 * release however often it is released or disposed, or once collected; and the checks of its cluster.
 */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { inspect, promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { ClusterClosedError, ObjectFreedError, WrongClusterError } from "../src/Errors.js"
import { type ClusterIdentity, ObjectRef, type RefTracker, isObjectRef, requireRefOf, requireUsableRef } from "../src/ObjectRef.js"
import { thrown } from "./helpers/errors.ts"

/** A tracker of cluster `id` that logs each acquire and release. */
const trackerOf = (cluster: ClusterIdentity = { id: "c-1", closed: false }) => {
  const log: Array<string> = []
  const tracker: RefTracker = {
    acquire: (objectId) => log.push(`acquire ${objectId}`),
    release: (objectId) => log.push(`release ${objectId}`),
    cluster,
  }
  return { tracker, log }
}

describe("ObjectRef", () => {
  it("acquires its object once when made", () => {
    const { tracker, log } = trackerOf()
    const ref = new ObjectRef("A-0.1", tracker)
    expect(log).toEqual(["acquire A-0.1"])
    expect(ref.id).toBe("A-0.1")
    expect(ref.released).toBe(false)
    ref.release()
  })

  it("releases once, however often release is called", () => {
    const { tracker, log } = trackerOf()
    const ref = new ObjectRef("A-0.1", tracker)
    ref.release()
    ref.release()
    ref[Symbol.dispose]()
    expect(ref.released).toBe(true)
    expect(log).toEqual(["acquire A-0.1", "release A-0.1"])
  })

  it("is released when a `using` block ends, even by a throw", () => {
    const { tracker, log } = trackerOf()
    const block = () => {
      using ref = new ObjectRef("A-0.2", tracker)
      expect(ref.released).toBe(false)
      throw new Error("leaving")
    }
    expect(block).toThrow("leaving")
    expect(log).toEqual(["acquire A-0.2", "release A-0.2"])
  })

  it("a ref dropped without release is released once it is collected; a released or kept one is not released again", async () => {
    const fixture = fileURLToPath(new URL("./fixtures/collectedRefs.ts", import.meta.url))
    const { stdout } = await promisify(execFile)(process.execPath, ["--expose-gc", "--import", "tsx", fixture], { timeout: 30_000 })
    expect(JSON.parse(stdout)).toEqual({ released: ["released", "dropped"], kept: false })
  })

  it("carries its cluster's id, and prints as its object id", () => {
    const refs = ["c-7", "c-8"].map((id) => new ObjectRef("A-0.3", trackerOf({ id, closed: false }).tracker))
    expect(refs.map((ref) => ref.clusterId)).toEqual(["c-7", "c-8"])
    expect(String(refs[0])).toBe("ObjectRef(A-0.3)")
    expect(inspect({ ref: refs[0] })).toBe("{ ref: ObjectRef(A-0.3) }")
    for (const ref of refs) ref.release()
  })

  it("isObjectRef knows refs from look-alikes", () => {
    const { tracker } = trackerOf()
    const ref = new ObjectRef("A-0.4", tracker)
    expect(isObjectRef(ref)).toBe(true)
    ref.release()
    expect(isObjectRef(ref)).toBe(true)
    for (const other of [{ id: "A-0.4", released: false }, "ObjectRef(A-0.4)", null, undefined, 4]) expect(isObjectRef(other)).toBe(false)
  })
})

describe("requireRefOf and requireUsableRef", () => {
  const mine: ClusterIdentity = { id: "mine", closed: false }

  it("accept a ref of the cluster that made it", () => {
    const ref = new ObjectRef("A-0.1", trackerOf(mine).tracker)
    requireRefOf(ref, mine)
    requireUsableRef(ref, mine)
    ref.release()
  })

  it("refuse another cluster's ref with WrongClusterError naming both clusters", () => {
    const theirs = new ObjectRef("A-0.1", trackerOf({ id: "theirs", closed: false }).tracker)
    for (const check of [requireRefOf, requireUsableRef]) {
      const error = thrown(() => check(theirs, mine))
      expect(error).toBeInstanceOf(WrongClusterError)
      expect((error as WrongClusterError).message).toBe("ObjectRef(A-0.1) belongs to another cluster (theirs), not to this one (mine)")
    }
    theirs.release()
  })

  it("refuse a shut-down cluster's ref with ClusterClosedError, in that cluster as in another", () => {
    const closed = { id: "old", closed: false }
    const ref = new ObjectRef("A-0.1", trackerOf(closed).tracker)
    ref.release()
    closed.closed = true
    for (const cluster of [closed, mine]) {
      for (const check of [requireRefOf, requireUsableRef]) {
        const error = thrown(() => check(ref, cluster))
        expect(error).toBeInstanceOf(ClusterClosedError)
        expect((error as ClusterClosedError).message).toBe("ObjectRef(A-0.1) belongs to a cluster that was shut down")
      }
    }
  })

  it("requireUsableRef refuses a released ref with ObjectFreedError; requireRefOf, which checks the cluster alone, takes it", () => {
    const ref = new ObjectRef("A-0.5", trackerOf(mine).tracker)
    ref.release()
    requireRefOf(ref, mine)
    const error = thrown(() => requireUsableRef(ref, mine))
    expect(error).toBeInstanceOf(ObjectFreedError)
    expect(error).toMatchObject({ objectId: "A-0.5", message: "ObjectRef(A-0.5) was released by its holder" })
  })
})
