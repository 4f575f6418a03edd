/**
 * Seed 000's register_nixl_memory: pin a tensor's memory registration for as long as the process
 * wants it, so that every object made from views of it reuses the one registration.
 *
 * It runs in the calling thread (an actor method's main thread) and registers with the process's
 * one NIXL agent, the same one objects are registered with: the addon keeps the agent and the
 * reference counts in process-wide statics (see native/ProcessAgent.h).
 */
import type { Tensor } from "@tensorlane/core"
import { loadNixl, loadedNixl } from "./Loader.js"
import { storageMemory } from "./internal/memory.js"
import { pin, unpin } from "./internal/registrations.js"

/**
 * Registers the memory of the tensor's whole storage with NIXL (once: a registered storage only
 * gains a reference) and keeps it registered until a matching deregisterNixlMemory. Every view of
 * the storage, put or returned with the nixl transport, then needs no new registration.
 */
export const registerNixlMemory = (tensor: Tensor): void => pin(loadNixl().addon, tensor)

/** Drops one registerNixlMemory reference; the memory is deregistered once no object uses it either. */
export const deregisterNixlMemory = (tensor: Tensor): void => unpin(loadNixl().addon, tensor)

/** How many references (objects and pins) hold the registration of this tensor's memory; 0 when unregistered. */
export const nixlRegistrationRefs = (tensor: Tensor): number =>
  loadedNixl()?.regionOf(storageMemory(tensor.storage))?.refs ?? 0
