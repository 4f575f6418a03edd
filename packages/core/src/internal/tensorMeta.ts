/**
 * Tensor metadata (its wire form: wireMetas.ts), the checks every received tensor passes, and the
 * tensors it describes: allocated to receive into, or filled from the concatenated bytes of a message.
 */
import { currentAllocator } from "../AllocatorScope.js"
import { parseDevice } from "../Device.js"
import { ProtocolError, ShapeError } from "../Errors.js"
import { Tensor } from "../Tensor.js"
import type { TensorMeta } from "./wireMetas.js"

export const tensorMeta = (tensor: Tensor): TensorMeta => ({
  dtype: tensor.dtype,
  shape: tensor.shape,
  device: tensor.device,
  nbytes: tensor.nbytes,
})

const describe = (m: TensorMeta): string => `${m.dtype}[${m.shape.join(", ")}] on ${m.device}`

/** Why `got` is not the list of tensors `expected` describes, or undefined when it is. */
export const metaMismatch = (expected: ReadonlyArray<TensorMeta>, got: ReadonlyArray<TensorMeta>): string | undefined => {
  if (expected.length !== got.length) return `expected ${expected.length} tensors, got ${got.length}`
  for (let i = 0; i < expected.length; i++) {
    const e = expected[i]
    const g = got[i]
    const same =
      e.dtype === g.dtype &&
      e.nbytes === g.nbytes &&
      e.device === g.device &&
      e.shape.length === g.shape.length &&
      e.shape.every((d, j) => d === g.shape[j])
    if (!same) return `tensor ${i}: expected ${describe(e)}, got ${describe(g)}`
  }
  return undefined
}

/**
 * Destination tensors (received, or given as `target`) must be exactly what the object describes, and
 * contiguous: every path writes an object's bytes in one run per tensor (an inline value's copy as
 * well as a transport's receive), which in a strided view would land on the wrong elements.
 */
export const checkReceived = (expected: ReadonlyArray<TensorMeta>, into: ReadonlyArray<Tensor>): void => {
  const mismatch = metaMismatch(expected, into.map(tensorMeta))
  if (mismatch !== undefined) throw new ShapeError({ message: mismatch })
  const strided = into.findIndex((t) => !t.isContiguous())
  if (strided >= 0) throw new ShapeError({ message: `target tensor ${strided} is a strided view: objects are received into contiguous tensors only (use a contiguous tensor, then copy into the view)` })
  // Two that share bytes would each get the other's tensor written over part of them.
  const placed = into
    .map((t, index) => ({ t, index }))
    .filter(({ t }) => t.nbytes > 0)
    .sort((a, b) => a.t.storage.id - b.t.storage.id || a.t.byteOffset - b.t.byteOffset)
  for (let k = 1; k < placed.length; k++) {
    const [before, after] = [placed[k - 1]!, placed[k]!]
    if (before.t.storage === after.t.storage && before.t.byteOffset + before.t.nbytes > after.t.byteOffset) {
      const [first, second] = [before.index, after.index].sort((x, y) => x - y)
      throw new ShapeError({ message: `target tensors ${first} and ${second} share memory: each tensor of the object is received into memory of its own` })
    }
  }
}

/** New tensors of the shapes, dtypes and devices `metas` describe, from the current allocators. */
export const allocateFor = (metas: ReadonlyArray<TensorMeta>): Array<Tensor> =>
  metas.map((m) => {
    const device = parseDevice(m.device)
    const storage = currentAllocator(device).allocate(m.nbytes)
    return Tensor.fromStorage(storage, { dtype: m.dtype as Tensor["dtype"], shape: m.shape })
  })

/**
 * Tensors holding `bytes`, the concatenated contents of tensors described by `metas` (inline values,
 * tensors passed by value): into `target` when given, else into new storage.
 */
export const tensorsFromBytes = (
  metas: ReadonlyArray<TensorMeta>,
  bytes: Uint8Array,
  what: string,
  target?: ReadonlyArray<Tensor>,
): ReadonlyArray<Tensor> => {
  const total = metas.reduce((n, m) => n + m.nbytes, 0)
  if (bytes.byteLength !== total) {
    throw new ProtocolError({ message: `${what} carries ${bytes.byteLength} bytes of tensors, ${total} expected` })
  }
  const into = target ?? allocateFor(metas)
  let offset = 0
  for (const t of into) {
    t.storage.bytes.set(bytes.subarray(offset, offset + t.nbytes), t.byteOffset)
    offset += t.nbytes
  }
  return into
}

/** The bytes of `tensors` (`total` of them together), concatenated in order. */
export const concatBytes = (tensors: ReadonlyArray<Tensor>, total: number): Uint8Array => {
  const out = new Uint8Array(total)
  let offset = 0
  for (const t of tensors) {
    out.set(t.contiguousBytes(), offset)
    offset += t.nbytes
  }
  return out
}
