/**
 * Control messages over the size limit: the call, put or result that needs one fails alone with
 * MessageTooLargeError (an oversized error is cut instead), and the actor lives on with its objects;
 * a peer that announces a frame beyond what an agent accepts is dropped before anything is buffered.
 */
import * as fs from "node:fs"
import * as net from "node:net"
import {
  type ActorHandle,
  ApplicationError,
  type Cluster,
  MAX_MESSAGE_BYTES,
  MessageTooLargeError,
  type ObjectRef,
  type Tensor,
  start,
} from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { encodePrefix } from "../packages/core/src/internal/frame.ts"
import { Holder, numbers } from "./fixtures/limitActors.ts"
import { SOCKETPAIR, agentSocketOf, expectClean, rejection, take as takeFrom, thrown } from "./helpers.ts"

const MiB = 1024 * 1024
const KEPT_BYTES = 1 * MiB

let cluster: Cluster
let holder: ActorHandle<typeof Holder>
/** In a group with `holder`. */
let peer: ActorHandle<typeof Holder>
let pid: number
/** An object the actor made before any oversized message: it must survive every case. */
let kept: ObjectRef<Tensor>
const take = <T>(ref: ObjectRef<T>) => takeFrom(cluster)(ref)

beforeAll(async () => {
  cluster = await start({ transports: [SOCKETPAIR] })
  ;[holder, peer] = await cluster.spawn(Holder, { count: 2 })
  pid = await take(holder.pid())
  kept = holder.make(KEPT_BYTES)
  await cluster.get(kept)
}, 60_000)

afterAll(() => cluster?.shutdown())

const expectTooLarge = (error: unknown): void => {
  expect(error).toBeInstanceOf(MessageTooLargeError)
  const { bytes, limit, message } = error as MessageTooLargeError
  expect(bytes).toBeGreaterThan(limit)
  expect(limit).toBeLessThanOrEqual(MAX_MESSAGE_BYTES)
  expect(message).toContain(String(limit))
  expect(message).toMatch(/Tensor/)
  expect(message).toMatch(/put/)
}

/** The same process answers a normal call, and the object it made before is still there. */
const expectAlive = async (): Promise<void> => {
  expect(await take(holder.pid())).toBe(pid)
  expect(await take(holder.sum(kept))).toBe(KEPT_BYTES / 4)
  expect((await cluster.get(kept)).numel).toBe(KEPT_BYTES / 4)
  const inspection = await cluster.inspect()
  expect(inspection.processes[holder.actorId].primary).toEqual([kept.id])
  expect(inspection.processes.driver.primary).toEqual([])
}

describe("a control message over the limit", () => {
  it("a 66 MiB string argument fails that call alone", async () => {
    expectTooLarge(thrown(() => holder.lengths("x".repeat(66 * MiB))))
    await expectAlive()
  })

  it("a 100 MB string result fails that call alone, and nothing of it stays in the actor", async () => {
    const ref = holder.text(100_000_000)
    expectTooLarge(await rejection(cluster.get(ref)))
    ref.release()
    await expectAlive()
  })

  it("an array of 10 million numbers fails as an argument, and as a put inside the actor", async () => {
    const array = numbers(10_000_000)
    expect(() => holder.lengths(array)).toThrow(MessageTooLargeError)
    const ref = holder.putNumbers(10_000_000)
    expectTooLarge(await rejection(cluster.get(ref)))
    ref.release()
    await expectAlive()
  })

  it("a 100 MB put is refused, and nothing is stored for it", async () => {
    expectTooLarge(await rejection(cluster.put("x".repeat(100_000_000))))
    await expectAlive()
  })

  it("refs that fit one by one but not together in a call fail that call alone", async () => {
    const a = await cluster.put("a".repeat(40 * MiB))
    const b = await cluster.put("b".repeat(40 * MiB))
    expect(await take(holder.lengths(a))).toEqual([40 * MiB])
    const ref = holder.lengths(a, b)
    expectTooLarge(await rejection(cluster.get(ref)))
    ref.release()
    a.release()
    b.release()
    await expectAlive()
  })

  it("blobs of a group's allGather that fit one by one but not together fail that round alone", async () => {
    const group = await cluster.createCollectiveGroup([holder, peer], { backend: "socketpair" })
    const [mine, theirs] = [holder.gatherSizes(group.name, 40 * MiB), peer.gatherSizes(group.name, 40 * MiB)]
    for (const ref of [mine, theirs]) {
      const error = await rejection(take(ref))
      expectTooLarge(error)
      expect((error as MessageTooLargeError).message).toContain("AllGathered")
    }
    expectTooLarge(await rejection(take(holder.gatherSizes(group.name, MAX_MESSAGE_BYTES))))
    expect(await Promise.all([take(holder.gatherSizes(group.name, 4)), take(peer.gatherSizes(group.name, 5))])).toEqual([[4, 5], [4, 5]])
    await group.destroy()
    await expectAlive()
  })

  it("an error whose message is 34 MiB arrives cut, as an ordinary ApplicationError", async () => {
    const ref = holder.fail(34 * MiB)
    const error = (await rejection(cluster.get(ref))) as ApplicationError
    ref.release()
    expect(error).toBeInstanceOf(ApplicationError)
    expect(error.remoteName).toBe("RangeError")
    expect(error.message.length).toBeLessThan(64 * 1024)
    expect(error.message).toMatch(/eeee\.\.\. \(\d+ more characters\)$/)
    // The frames after the message survive the cut.
    expect(error.remoteStack).toContain("limitActors.ts")
    await expectAlive()
  })
})

/** Resident memory of a process, in bytes. */
const rss = (processId: number): number => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${processId}/status`, "utf8"))![1]) * 1024

describe("an agent's accepted connections", () => {
  it("hold nothing for 24 peers at once that announce a 64 MiB frame and send most of it, nor after they go", async () => {
    const address = agentSocketOf(holder.actorId)
    const before = rss(pid)
    const chunk = Buffer.alloc(MiB, 7)
    const peers = await Promise.all(
      Array.from({ length: 24 }, async () => {
        const socket = net.createConnection(address)
        await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject))
        socket.on("error", () => undefined)
        const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
        socket.write(encodePrefix(64 * MiB, 0))
        for (let sent = 0; sent < 60; sent++) socket.write(chunk)
        // Until the agent took it all in, or hung up.
        await Promise.race([closed, new Promise<void>((resolve) => socket.write(Buffer.alloc(0), () => resolve()))])
        return { socket, closed }
      }),
    )
    const whileOpen = rss(pid) - before
    for (const peer of peers) peer.socket.destroy()
    await Promise.all(peers.map((peer) => peer.closed))
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(whileOpen, "growth while the peers are connected").toBeLessThan(64 * MiB)
    expect(rss(pid) - before, "growth after they closed").toBeLessThan(64 * MiB)
    await expectAlive()
  })
})

it("leaves nothing behind", async () => {
  kept.release()
  await expectClean(cluster)
})
