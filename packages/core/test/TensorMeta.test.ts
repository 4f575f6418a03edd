/**
 * What a received object's tensors may be written into (`get`'s `target`): exactly the tensors the
 * object describes, each contiguous and in memory of its own.
 */
import { describe, expect, it } from "vitest"
import { Tensor } from "../src/Tensor.js"
import { checkReceived, tensorMeta } from "../src/internal/tensorMeta.js"
import { thrown } from "./helpers/errors.ts"

const metas = (...tensors: Array<Tensor>) => tensors.map(tensorMeta)

describe("checkReceived", () => {
  it("takes contiguous tensors of the object's shapes, views of one storage side by side included", () => {
    const storage = Tensor.zeros([8])
    expect(checkReceived(metas(Tensor.zeros([4]), Tensor.zeros([4])), [storage.slice(0, 0, 4), storage.slice(0, 4, 8)])).toBeUndefined()
    // Empty tensors hold no bytes to share.
    expect(checkReceived(metas(Tensor.zeros([0]), Tensor.zeros([0])), [storage.slice(0, 2, 2), storage.slice(0, 2, 2)])).toBeUndefined()
  })

  it("refuses targets that share memory: the same tensor twice, or overlapping views", () => {
    const t = Tensor.zeros([4])
    const storage = Tensor.zeros([9])
    for (const [into, pair] of [
      [[t, t], "0 and 1"],
      [[storage.slice(0, 0, 4), storage.slice(0, 1, 5)], "0 and 1"],
      [[Tensor.zeros([4]), storage.slice(0, 5, 9), storage.slice(0, 2, 6)], "1 and 2"],
    ] as const) {
      expect(thrown(() => checkReceived(metas(Tensor.zeros([4]), Tensor.zeros([4]), Tensor.zeros([4])).slice(0, into.length), into))).toMatchObject({
        _tag: "ShapeError",
        message: `target tensors ${pair} share memory: each tensor of the object is received into memory of its own`,
      })
    }
  })
})
