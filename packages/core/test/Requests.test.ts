/**
 * The table of pending requests every channel keeps: ids, settling by reply, time limits, a peer's
 * requests failed together, and nothing left behind by a request whose message could not be sent.
 */
import { describe, expect, it } from "vitest"
import { ObjectFreedError, TimeoutError } from "../src/Errors.js"
import { Requests } from "../src/internal/requests.js"
import { toWireError } from "../src/internal/wireError.js"

const outcome = (promise: Promise<unknown>) =>
  promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  )

describe("Requests", () => {
  it("hands each request its own id and settles it by that id alone", async () => {
    const requests = new Requests<string>()
    const ids: Array<number> = []
    const first = requests.request((id) => ids.push(id))
    const second = requests.request((id) => ids.push(id))
    expect(new Set(ids).size).toBe(2)
    expect(requests.size).toBe(2)
    expect(requests.resolve(ids[1]!, "second")).toBe(true)
    expect(requests.reject(ids[0]!, new Error("first"))).toBe(true)
    expect(await second).toBe("second")
    await expect(first).rejects.toThrow("first")
    // A reply for an id that is no longer pending (a late or a duplicate one) settles nothing.
    expect(requests.resolve(ids[0]!, "again")).toBe(false)
    expect(requests.size).toBe(0)
  })

  it("fails a request whose message cannot be sent and keeps nothing of it", async () => {
    const requests = new Requests<string>()
    const refused = requests.request(() => {
      throw new RangeError("too large")
    })
    await expect(refused).rejects.toThrow(RangeError)
    expect(requests.size).toBe(0)
  })

  it("fails a request past its time limit and forgets it", async () => {
    const requests = new Requests<string>()
    let id = 0
    const started = performance.now()
    const late = outcome(
      requests.request((i) => (id = i), { timeout: { ms: 50, timedOut: () => new TimeoutError({ message: "no answer", timeoutMs: 50 }) } }),
    )
    expect(await late).toEqual({ error: expect.any(TimeoutError) })
    expect(performance.now() - started).toBeGreaterThanOrEqual(45)
    expect(requests.size).toBe(0)
    expect(requests.resolve(id, "too late")).toBe(false)
  })

  it("clears the time limit of a request answered in time", async () => {
    const requests = new Requests<string>()
    let id = 0
    const answered = requests.request((i) => (id = i), { timeout: { ms: 30, timedOut: () => new Error("timed out") } })
    requests.resolve(id, "in time")
    expect(await answered).toBe("in time")
    await new Promise((resolve) => setTimeout(resolve, 60))
    expect(requests.size).toBe(0)
  })

  it("fails the requests of one peer together, and leaves the others' waiting", async () => {
    const requests = new Requests<string>()
    const peerA = { name: "a" }
    const ids = new Map<string, number>()
    const a1 = outcome(requests.request((id) => ids.set("a1", id), { peer: peerA }))
    const a2 = outcome(requests.request((id) => ids.set("a2", id), { peer: peerA }))
    const b = outcome(requests.request((id) => ids.set("b", id), { peer: "b" }))
    const died = new Error("a died")
    requests.failPeer(peerA, died)
    expect(await a1).toEqual({ error: died })
    expect(await a2).toEqual({ error: died })
    expect(requests.size).toBe(1)
    requests.resolve(ids.get("b")!, "from b")
    expect(await b).toEqual({ value: "from b" })
  })

  it("takes a reply only from the peer that was asked, where the reply names who sent it", async () => {
    const requests = new Requests<string, string>()
    let id = 0
    const asked = requests.request((i) => (id = i), { peer: "a", context: "of a" })
    expect(requests.context(id, "b")).toBeUndefined()
    expect(requests.resolve(id, "from b", "b")).toBe(false)
    expect(requests.reject(id, new Error("from b"), "b")).toBe(false)
    expect(requests.answer(id, undefined, "from b", { actor: "b", method: "m" }, "b")).toBe(false)
    expect(requests.size).toBe(1)
    expect(requests.context(id, "a")).toBe("of a")
    expect(requests.resolve(id, "from a", "a")).toBe(true)
    expect(await asked).toBe("from a")
  })

  it("fails every request when it closes", async () => {
    const requests = new Requests<string>()
    const waiting = [outcome(requests.request(() => undefined, { peer: "a" })), outcome(requests.request(() => undefined))]
    const closed = new Error("closing")
    requests.failAll(closed)
    expect(await Promise.all(waiting)).toEqual([{ error: closed }, { error: closed }])
    expect(requests.size).toBe(0)
  })

  it("keeps a request's context for its reply's handler while it waits", () => {
    const requests = new Requests<string, { expected: number }>()
    let id = 0
    void requests.request((i) => (id = i), { context: { expected: 4 } })
    expect(requests.context(id)).toEqual({ expected: 4 })
    requests.resolve(id, "done")
    expect(requests.context(id)).toBeUndefined()
  })

  it("settles by a reply that carries a wire error as the error's own class, else with its value", async () => {
    const requests = new Requests<{ n: number }>()
    const ids: Array<number> = []
    const failed = requests.request((id) => ids.push(id))
    const answered = requests.request((id) => ids.push(id))
    const wire = toWireError(new ObjectFreedError({ message: "gone", objectId: "driver.1" }))
    requests.answer(ids[0]!, wire, { n: 0 }, { actor: "driver", method: "get" })
    requests.answer(ids[1]!, undefined, { n: 1 }, { actor: "driver", method: "get" })
    await expect(failed).rejects.toBeInstanceOf(ObjectFreedError)
    expect(await answered).toEqual({ n: 1 })
  })
})
