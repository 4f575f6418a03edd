/** When the buffers of a failed transfer may be used again: what the transport says, or never. */
import { expect, it } from "vitest"
import { BufferUse } from "../src/internal/quarantine.js"
import { type PromiseTransport, defineTransport } from "../src/Transport.js"

const transport = (tracksBuffers: boolean): PromiseTransport =>
  defineTransport({
    name: "t",
    capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu"], receiveIntoBuffers: true, tracksBuffers },
    fetch: async () => undefined,
  })

/** "released" if `released` settles within a few turns of the event loop, else "kept". */
const within = (released: Promise<void>) =>
  Promise.race([released.then(() => "released"), new Promise((resolve) => setTimeout(() => resolve("kept"), 20))])

it("keeps the buffers of a tracking transport until its call and every promise it passed to writesUntil settled", async () => {
  const use = new BufferUse(transport(true))
  let finish!: () => void
  let retire!: () => void
  const call = use.run(
    (writesUntil) =>
      new Promise<void>((_, reject) => {
        writesUntil(new Promise<void>((resolve) => (retire = resolve)))
        finish = () => reject(new Error("failed"))
      }),
  )
  call.catch(() => undefined)
  expect(await within(use.released())).toBe("kept")
  finish()
  expect(await within(use.released())).toBe("kept")
  retire()
  expect(await within(use.released())).toBe("released")
})

it("keeps those of a transport that cannot tell for good, and has nothing to keep when the transport was never called", async () => {
  const untracked = new BufferUse(transport(false))
  await untracked.run(async () => undefined)
  expect(await within(untracked.released())).toBe("kept")
  expect(await within(new BufferUse(transport(true)).released())).toBe("released")
})
