/**
 * The `nixl` tensor transport: one-sided READs through NIXL (UCX). The producer registers each
 * storage its object points into once (reference counted) and hands out NIXL metadata with the
 * object; the consumer checks every descriptor against the declared regions and READs straight
 * into its buffers on a native thread. The producer does nothing per transfer: its NIXL progress
 * thread answers, so a busy JS thread there does not stall the READ.
 */
import { ProtocolError, ShapeError } from "@tensorlane/core"
import { defineTransport } from "@tensorlane/core/plugin"
import type { NativeOperation } from "./AddonTypes.js"
import { TRANSPORT, toTensorlaneError } from "./internal/failures.js"
import { loadNixl, loadedNixl } from "./Loader.js"
import { storageMemory, tensorMemory } from "./internal/memory.js"
import type { NixlMetadata } from "./AddonTypes.js"
import { isPinned, registerObject, releaseObject } from "./internal/registrations.js"

/** Reads of this thread still running, so that close() can end them before the worker goes. */
const running = new Set<NativeOperation>()

const isBytes = (x: unknown): x is Uint8Array => x instanceof Uint8Array

/** A peer's metadata: only its shape is checked here; every number is checked again natively. */
const parseMetadata = (metadata: unknown, count: number, objectId: string): NixlMetadata => {
  const m = metadata as Partial<NixlMetadata> | undefined
  const bad = (why: string): never => {
    throw new ProtocolError({ message: `nixl metadata of object ${objectId} is malformed: ${why}` })
  }
  if (typeof m !== "object" || m === null) return bad("not an object")
  if (m.version !== 1) return bad(`unknown version ${String(m.version)}`)
  if (typeof m.agent !== "string" || m.agent.length === 0) return bad("no agent name")
  if (!isBytes(m.blob)) return bad("no NIXL blob")
  if (typeof m.epoch !== "number") return bad("no epoch")
  if (!Array.isArray(m.regions)) return bad("no regions")
  if (!Array.isArray(m.tensors) || m.tensors.length !== count) return bad(`describes ${Array.isArray(m.tensors) ? m.tensors.length : 0} tensors, the object has ${count}`)
  return m as NixlMetadata
}

export const nixl = defineTransport({
  name: TRANSPORT,
  // Regions, their reference counts and the NIXL agent live in the addon, one per process. A fetch
  // settles only once NIXL no longer touches its destinations, aborted or not.
  capabilities: { oneSided: true, needsGroup: false, abortable: true, devices: ["cpu", "cuda"], receiveIntoBuffers: true, anyThread: true, tracksBuffers: true, inlinesSmallValues: true },

  extractMetadata: ({ objectId, tensors }) => {
    if (tensors.length === 0) return undefined
    return registerObject(loadNixl().addon, objectId, tensors)
  },

  release: ({ objectId }) => {
    const nixlLoaded = loadedNixl()
    if (nixlLoaded !== undefined) releaseObject(nixlLoaded, objectId)
  },

  // A storage pinned by registerNixlMemory travels without a new registration (the pins are this thread's, as the registrations of its objects).
  registered: isPinned,

  fetch: async ({ objectId, producer, consumer, metadata, into, signal }) => {
    const what = `nixl fetch of ${objectId} from ${producer} to ${consumer}`
    if (into.length === 0) return
    if (signal.aborted) throw signal.reason
    const m = parseMetadata(metadata, into.length, objectId)
    into.forEach((t, i) => {
      if (!t.isContiguous()) {
        throw new ShapeError({ message: `${what}: target tensor ${i} is a strided view; NIXL writes into contiguous tensors only` })
      }
    })
    const { addon } = loadNixl()
    let operation: NativeOperation
    try {
      operation = addon.read(
        {
          agent: m.agent,
          blob: m.blob,
          epoch: m.epoch,
          regions: m.regions,
          remote: m.tensors,
          local: into.map((t) => ({ tensor: tensorMemory(t), storage: storageMemory(t.storage) })),
        },
        into,
      )
    } catch (error) {
      throw toTensorlaneError(error, what)
    }
    running.add(operation)
    const onAbort = () => operation.abort()
    signal.addEventListener("abort", onAbort, { once: true })
    try {
      await operation.promise
    } catch (error) {
      throw signal.aborted ? signal.reason : toTensorlaneError(error, what)
    } finally {
      signal.removeEventListener("abort", onAbort)
      running.delete(operation)
    }
  },

  inspect: () => {
    const addon = loadedNixl()
    if (addon === undefined) return { registrations: [] }
    return {
      registrations: addon
        .registrations()
        .map((r) => `nixl ${r.mem}${r.mem === "vram" ? `:${r.device}` : ""} 0x${r.address.toString(16)} ${r.length} bytes, ${r.refs} refs`),
    }
  },

  // NIXL's library and the process's agent with its UCX backend: about 70 ms that the first
  // registration or read would otherwise wait for (the producer's, then the consumer's).
  prepare: () => {
    loadNixl().addon.localMetadata()
  },

  close: async () => {
    // Settled reads no longer touch their buffers: the worker may then go.
    const pending = [...running]
    for (const operation of pending) operation.abort()
    await Promise.allSettled(pending.map((operation) => operation.promise))
  },
})
