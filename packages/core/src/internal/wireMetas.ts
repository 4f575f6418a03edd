/**
 * A list of tensors' metadata as it travels: `names` holds the dtype and device names it uses, and
 * `bytes` a u32 count, then per tensor a byte for its dtype's place in `names`, one for its device's,
 * a u16 rank and its dimensions (float64 each), all little-endian; a tensor's byte count follows from
 * them. V8's serializer copies bytes as they are, where a list of objects costs some 1.5 µs a tensor
 * to serialize, deserialize and check at every hop of a value of many tensors.
 */
import { parseDevice } from "../Device.js"
import { DTypes, isDType } from "../DType.js"
import { InvalidArgumentError, ProtocolError } from "../Errors.js"
import { MAX_DIMS } from "./layout.js"

/** What travels about one tensor: enough to allocate and validate the receiving buffer. */
export interface TensorMeta {
  readonly dtype: string
  readonly shape: ReadonlyArray<number>
  readonly device: string
  readonly nbytes: number
}

export interface TensorMetas {
  readonly names: ReadonlyArray<string>
  readonly bytes: Uint8Array
}

/** A name's place in `names` is one byte. */
export const MAX_META_NAMES = 256
const COUNT_BYTES = 4
const HEAD_BYTES = 4
const DIM_BYTES = 8

type Described = Pick<TensorMeta, "dtype" | "shape" | "device">

/** The wire form of the metadata of `tensors` (tensors or metas, in order). */
export const writeMetas = (tensors: ReadonlyArray<Described>): TensorMetas => {
  const names: Array<string> = []
  const place = new Map<string, number>()
  const placeOf = (name: string): number => {
    let at = place.get(name)
    if (at === undefined) {
      if (names.length === MAX_META_NAMES) throw new InvalidArgumentError({ message: `the tensors of one value may use at most ${MAX_META_NAMES} dtypes and devices together`, argument: "tensors" })
      place.set(name, (at = names.push(name) - 1))
    }
    return at
  }
  let size = COUNT_BYTES
  for (const t of tensors) {
    // A Tensor has at most MAX_DIMS; a u16 rank would wrap far past it.
    if (t.shape.length > MAX_DIMS) throw new InvalidArgumentError({ message: `a tensor of ${t.shape.length} dimensions cannot travel (at most ${MAX_DIMS})`, argument: "tensors" })
    size += HEAD_BYTES + DIM_BYTES * t.shape.length
  }
  const bytes = new Uint8Array(size)
  const view = new DataView(bytes.buffer)
  view.setUint32(0, tensors.length, true)
  let at = COUNT_BYTES
  for (const t of tensors) {
    view.setUint8(at, placeOf(t.dtype))
    view.setUint8(at + 1, placeOf(t.device))
    view.setUint16(at + 2, t.shape.length, true)
    at += HEAD_BYTES
    for (const d of t.shape) {
      view.setFloat64(at, d, true)
      at += DIM_BYTES
    }
  }
  return { names, bytes }
}

/** How many tensors `metas` describes (a list that arrived has passed `metasProblem`). */
export const metaCount = (metas: TensorMetas): number =>
  metas.bytes.byteLength < COUNT_BYTES ? 0 : new DataView(metas.bytes.buffer, metas.bytes.byteOffset, metas.bytes.byteLength).getUint32(0, true)

/**
 * Reads the list, checking what a hostile or broken peer could use to make us allocate or read out
 * of bounds: known dtypes and devices, shapes a Tensor takes (at most MAX_DIMS whole non-negative
 * dimensions whose non-zero ones multiply to a safe integer, as checkShape), byte counts that can be
 * addressed, no byte short or left over. `into` receives the metas; the total bytes are returned.
 */
const parse = (metas: TensorMetas, into: Array<TensorMeta> | undefined): number => {
  const { names, bytes } = metas
  if (names.length > MAX_META_NAMES) throw new ProtocolError({ message: `tensor metadata names ${names.length} dtypes and devices (at most ${MAX_META_NAMES})` })
  if (bytes.byteLength < COUNT_BYTES) throw new ProtocolError({ message: "tensor metadata without its count" })
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const count = view.getUint32(0, true)
  if (COUNT_BYTES + HEAD_BYTES * count > bytes.byteLength) throw new ProtocolError({ message: `tensor metadata says ${count} tensors in ${bytes.byteLength} bytes` })
  const dtypes: Array<boolean | undefined> = []
  const devices: Array<boolean | undefined> = []
  let total = 0
  let at = COUNT_BYTES
  for (let i = 0; i < count; i++) {
    if (at + HEAD_BYTES > bytes.byteLength) throw new ProtocolError({ message: `tensor metadata ends inside tensor ${i} of ${count}` })
    const [dtypeAt, deviceAt, rank] = [view.getUint8(at), view.getUint8(at + 1), view.getUint16(at + 2, true)]
    const [dtype, device] = [names[dtypeAt], names[deviceAt]]
    at += HEAD_BYTES
    if (!(dtypes[dtypeAt] ??= isDType(dtype))) throw new ProtocolError({ message: `unknown dtype ${JSON.stringify(dtype)} in tensor metadata` })
    if (!(devices[deviceAt] ??= knownDevice(device))) throw new ProtocolError({ message: `unknown device ${JSON.stringify(device)} in tensor metadata` })
    if (rank > MAX_DIMS) throw new ProtocolError({ message: `tensor metadata gives tensor ${i} ${rank} dimensions (at most ${MAX_DIMS})` })
    if (at + DIM_BYTES * rank > bytes.byteLength) throw new ProtocolError({ message: `tensor metadata ends inside tensor ${i} of ${count}` })
    const shape: Array<number> = []
    let nonZero = 1
    for (let j = 0; j < rank; j++) {
      const d = view.getFloat64(at, true)
      at += DIM_BYTES
      if (!Number.isSafeInteger(d) || d < 0) throw new ProtocolError({ message: `invalid dimension ${d} in tensor metadata` })
      if (d !== 0) nonZero *= d
      if (!Number.isSafeInteger(nonZero)) throw new ProtocolError({ message: "tensor metadata describes more elements than can be addressed" })
      // -0 is a whole number too: it becomes 0.
      shape.push(d === 0 ? 0 : d)
    }
    const nbytes = (shape.includes(0) ? 0 : nonZero) * DTypes[dtype as keyof typeof DTypes].itemSize
    if (!Number.isSafeInteger(nbytes)) throw new ProtocolError({ message: "tensor metadata describes more bytes than can be addressed" })
    total += nbytes
    into?.push({ dtype: dtype!, shape, device: device!, nbytes })
  }
  if (at !== bytes.byteLength) throw new ProtocolError({ message: `tensor metadata holds ${bytes.byteLength - at} bytes past its ${count} tensors` })
  if (!Number.isSafeInteger(total)) throw new ProtocolError({ message: "tensor metadata describes more bytes than can be addressed" })
  return total
}

const knownDevice = (name: string | undefined): boolean => {
  try {
    parseDevice(name)
    return true
  } catch {
    return false
  }
}

/** The metas of the list, checked; ProtocolError for one that breaks its format or describes what cannot be. */
export const readMetas = (metas: TensorMetas): Array<TensorMeta> => {
  const into: Array<TensorMeta> = []
  parse(metas, into)
  return into
}

/** The bytes of all the tensors the list describes (checked as `readMetas` does). */
export const metaBytes = (metas: TensorMetas): number => parse(metas, undefined)

/** Why the list is not one `readMetas` reads, or undefined when it is: the check of every list that arrives. */
export const metasProblem = (metas: TensorMetas): string | undefined => {
  try {
    parse(metas, undefined)
    return undefined
  } catch (error) {
    return error instanceof ProtocolError ? error.message : String(error)
  }
}
