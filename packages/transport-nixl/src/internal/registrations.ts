/**
 * Which registrations this JS thread holds, by owner: objects (in the thread that produced them, one
 * reference per storage an object's tensors point into) and pins (registerNixlMemory, in whatever
 * thread calls it). The regions and their reference counts live in the addon, shared by every
 * thread of the process; this side only remembers what to give back.
 */
import { DTypes, type Storage, type Tensor, UnsupportedOperationError } from "@tensorlane/core"
import type { DeclaredRegion, NixlAddon, NixlMetadata, RegionKey, RemoteLayout } from "../AddonTypes.js"
import { toTensorlaneError } from "./failures.js"
import { storageMemory } from "./memory.js"

const objects = new Map<string, ReadonlyArray<RegionKey>>()

const releaseAll = (addon: NixlAddon, keys: ReadonlyArray<RegionKey>): void => {
  for (const key of keys) addon.release(key)
}

/**
 * The most descriptors one READ of an object may post: the addon's ReadPlan refuses more (kMaxSpans).
 * Runs are counted here before ReadPlan joins adjacent ones, so this errs on the side of refusing.
 */
const MAX_READ_RUNS = 2 ** 20

/** The separate runs a consumer reads a tensor in: one per element of the dimensions before its longest contiguous suffix (ReadPlan's rule). */
const runsOf = (tensor: Tensor): number => {
  let runElements = 1
  let split = tensor.shape.length
  while (split > 0 && (tensor.shape[split - 1] === 1 || tensor.strides[split - 1] === runElements)) runElements *= tensor.shape[--split]!
  return runElements === 0 ? 0 : tensor.numel / runElements
}

/**
 * Refused at the producer, where the method returns it: an object whose strided views make more runs
 * than one READ posts would fail on every consumer instead.
 */
const checkRuns = (objectId: string, tensors: ReadonlyArray<Tensor>): void => {
  const runs = tensors.map(runsOf)
  const total = runs.reduce((sum, n) => sum + n, 0)
  if (total <= MAX_READ_RUNS) return
  const most = runs.indexOf(Math.max(...runs))
  throw new UnsupportedOperationError({
    message: `object ${objectId} cannot travel over nixl: its tensors are read in ${total} separate runs, more than the ${MAX_READ_RUNS} one READ posts (tensor ${most}, a strided view, makes ${runs[most]}); return contiguous tensors (tensor.contiguous())`,
  })
}

/** Registers what an object needs (each storage once) and describes it for consumers. */
export const registerObject = (addon: NixlAddon, objectId: string, tensors: ReadonlyArray<Tensor>): NixlMetadata => {
  checkRuns(objectId, tensors)
  const keys: Array<RegionKey> = []
  const regions: Array<DeclaredRegion> = []
  const placed = new Map<Storage, { readonly region: number; readonly offset: number }>()
  const layouts: Array<RemoteLayout> = []
  try {
    for (const tensor of tensors) {
      let place = placed.get(tensor.storage)
      if (place === undefined && tensor.storage.byteLength > 0) {
        const memory = storageMemory(tensor.storage)
        const got = addon.acquire(memory)
        keys.push(got)
        let region = regions.findIndex((r) => r.address === got.address && r.length === got.length)
        if (region < 0) region = regions.push({ address: got.address, length: got.length, mem: memory.mem, device: memory.device }) - 1
        place = { region, offset: got.offset }
        placed.set(tensor.storage, place)
      }
      layouts.push({
        region: place?.region ?? 0,
        offset: (place?.offset ?? 0) + tensor.byteOffset,
        shape: tensor.shape,
        strides: tensor.strides,
        itemSize: DTypes[tensor.dtype].itemSize,
      })
    }
    // Taken after registering: the blob must carry the keys of the regions just registered.
    const local = addon.localMetadata()
    objects.set(objectId, keys)
    return { version: 1, agent: local.agent, blob: local.blob, epoch: local.epoch, regions, tensors: layouts }
  } catch (error) {
    releaseAll(addon, keys)
    throw toTensorlaneError(error, `nixl registration of object ${objectId}`)
  }
}

export const releaseObject = (addon: NixlAddon, objectId: string): void => {
  const keys = objects.get(objectId)
  if (keys === undefined) return
  objects.delete(objectId)
  releaseAll(addon, keys)
}

/** Pins by storage: the map keeps the storage (and so its memory) alive while registered. */
const pins = new Map<Storage, { readonly key: RegionKey; count: number }>()

export const pin = (addon: NixlAddon, tensor: Tensor): void => {
  let key: RegionKey
  try {
    key = addon.acquire(storageMemory(tensor.storage))
  } catch (error) {
    throw toTensorlaneError(error, `registerNixlMemory of storage ${tensor.storage.id}`)
  }
  const entry = pins.get(tensor.storage)
  if (entry === undefined) pins.set(tensor.storage, { key, count: 1 })
  else entry.count++
}

/** Whether registerNixlMemory pinned this storage in this thread. */
export const isPinned = (storage: Storage): boolean => pins.has(storage)

export const unpin = (addon: NixlAddon, tensor: Tensor): void => {
  const entry = pins.get(tensor.storage)
  if (entry === undefined) {
    throw new UnsupportedOperationError({
      message: `deregisterNixlMemory: storage ${tensor.storage.id} was not registered with registerNixlMemory in this thread`,
    })
  }
  addon.release(entry.key)
  if (--entry.count === 0) pins.delete(tensor.storage)
}
