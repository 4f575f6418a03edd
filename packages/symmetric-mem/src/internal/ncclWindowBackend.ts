/**
 * The `nccl-window` backend: every rank's block is device memory from ncclMemAlloc registered as an
 * NCCL window (ncclCommWindowRegister, NCCL >= 2.27.3) on one communicator of the group's ranks.
 * The NCCL code is @tensorlane/transport-nccl's, imported when the backend is first used (an
 * optional peer: without it, SymmetricBackendError "needs-package").
 *
 * Which communicator: the group's own when it is an nccl group (the communicator its collectives
 * run on, so that they can use the windows); for any other group (shm, gloo) one of the heap's own,
 * named "<group>/nccl-window", bootstrapped from rank 0's ncclUniqueId over the group's gather on
 * the first allocation (device $TENSORLANE_NCCL_DEVICE, else cuda:0, or `device`) and destroyed
 * when its last block is freed.
 *
 * ncclCommWindowRegister is collective: a rank that enters it while another rank failed to get its
 * memory would wait inside NCCL until the timeout. So the ranks first agree that every one of them
 * holds its memory (core's agreeOnOutcome: a failure is undone on every rank, the failing
 * rank raises its own error, NoCudaDeviceError without a GPU, NcclVersionError, NcclError, the
 * others NcclRegistrationError). The registration itself follows transport-nccl's rule for windows
 * (core's runLockstep, as its pool registration): a rank that fails it leaves the others inside the call
 * until their limit, and a deregistration to undo it would be collective too, so only when every
 * rank's call failed on a healthy communicator do the ranks undo together; otherwise every rank
 * aborts the communicator (ncclCommAbort) and raises NcclRegistrationError: the group must be
 * destroyed and created again. Either way every rank frees its memory (and a heap's communicator
 * this call created).
 */
import { DeviceError, type Device, type GroupMember, type Storage, isCuda, parseDevice } from "@tensorlane/core"
import { type AgreementGroup, type AgreementOptions, type LocalFailure, type Step, agreeOnOutcome, messageOf, runLockstep } from "@tensorlane/core/plugin"
import type * as Nccl from "@tensorlane/transport-nccl"
import type { SymmetricBackend, SymmetricBlock } from "../Backend.js"
import { SymmetricBackendError } from "../Errors.js"
import { collectiveAllocator, deviceStorage } from "./collectiveMemory.js"

const NAME = "nccl-window"
export const NCCL_PACKAGE = "@tensorlane/transport-nccl"
/** The limit of NCCL's collective calls when the allocation sets none. */
const TIMEOUT_MS = 60_000

type Provider = typeof Nccl

let provider: Promise<Provider> | undefined

/** transport-nccl, imported once; SymmetricBackendError "needs-package" when it is not installed. */
export const loadProvider = (): Promise<Provider> =>
  (provider ??= import(NCCL_PACKAGE).catch((error: unknown) => {
    provider = undefined
    const code = (error as { code?: unknown }).code
    if (code === "ERR_MODULE_NOT_FOUND" && String((error as Error).message).includes(NCCL_PACKAGE)) {
      throw new SymmetricBackendError({
        message: `the ${NAME} backend needs ${NCCL_PACKAGE}, which is not installed: npm install ${NCCL_PACKAGE} (in every actor's environment)`,
        backend: NAME,
        reason: "needs-package",
      })
    }
    throw error
  }) as Promise<Provider>)

/**
 * The memory of live blocks, by group: held until freeSymmetric, so that a leaked symmetric tensor
 * never lets the collector ncclMemFree memory still registered as a window. A heap's own
 * communicator goes with its group's last block.
 */
const liveBlocks = new Map<string, Set<Storage>>()

const blocksOf = (group: string): Set<Storage> => {
  let blocks = liveBlocks.get(group)
  if (blocks === undefined) liveBlocks.set(group, (blocks = new Set()))
  return blocks
}

/** Runs a local step, returning its failure (for agreeOnOutcome) instead of throwing it. */
const localOutcome = async <A>(what: string, step: () => A | Promise<A>): Promise<{ readonly value?: A; readonly failure?: LocalFailure }> => {
  try {
    return { value: await step() }
  } catch (error) {
    return { failure: { message: `${what}: ${messageOf(error)}`, error } }
  }
}

interface Communicator {
  readonly name: string
  readonly device: Device
  /** The heap's own (created here, destroyed with its last block), not the nccl group's. */
  readonly own: boolean
}

/** The group's nccl communicator in this process, if the group is an nccl group. */
const groupCommunicator = (nccl: Provider, member: GroupMember, device: Device | undefined): Communicator | undefined => {
  const comm = nccl.loadCuda().addon.communicators().find((c) => c.group === member.name)
  if (comm === undefined) return undefined
  const own: Device = `cuda:${comm.device}`
  if (device !== undefined && device !== own) {
    throw new DeviceError({ message: `nccl group "${member.name}" communicates on ${own}: its ${NAME} heap cannot be on ${device}`, device })
  }
  return { name: member.name, device: own, own: false }
}

export const ncclWindowBackend: SymmetricBackend = {
  name: NAME,
  heapId: () => NAME,
  digest: (member) => String(liveBlocks.get(member.name)?.size ?? 0),
  allocate: async (member, byteLength, gather, options) => {
    // Every rank of a cluster has the same packages installed: a missing one is refused at once, on every rank.
    const nccl = await loadProvider()
    const what = `${NAME} allocation of ${byteLength} bytes in group "${member.name}" (rank ${member.rank})`
    const timeoutMs = options.timeoutMs ?? TIMEOUT_MS
    // The agreements run over the front end's gather (and its timeout).
    const group: AgreementGroup = { name: member.name, rank: member.rank, worldSize: member.worldSize, allGather: (blob) => gather(blob) }
    const agreement: AgreementOptions = { timeoutMs, error: (failure) => new nccl.NcclRegistrationError(failure) }
    const agree = (failure: LocalFailure | undefined, rollback: () => Promise<void>) =>
      agreeOnOutcome(group, what, failure, async () => (await rollback(), []), { ...agreement, ownErrors: true })
    // Local steps: the libraries, the version gate, the communicator (or where the heap's own will be), the memory.
    const prepared = await localOutcome("allocating its block", () => {
      const { version } = nccl.loadCuda()
      nccl.requireFeature(version, "windows", `the ${NAME} backend of @tensorlane/symmetric-mem (ncclCommWindowRegister)`)
      const wanted = options.device === undefined ? undefined : parseDevice(options.device)
      if (wanted !== undefined && !isCuda(wanted)) throw new DeviceError({ message: `the ${NAME} backend allocates CUDA memory, not ${wanted}`, device: wanted })
      const existing = groupCommunicator(nccl, member, wanted)
      const device = existing?.device ?? wanted ?? nccl.communicatorDevice()
      const communicator: Communicator = existing ?? { name: `${member.name}/${NAME}`, device, own: true }
      return { communicator, memory: nccl.allocateNcclMemory(device, byteLength) }
    })
    const freeMemory = async () => {
      if (prepared.value !== undefined) nccl.freeNcclMemory(prepared.value.memory)
    }
    await agree(prepared.failure, freeMemory)
    const { communicator, memory } = prepared.value!
    let created = false
    const dropCommunicator = async () => {
      if (created) await nccl.nccl.destroyGroup!(communicator.name).catch(() => undefined)
    }
    if (communicator.own && !nccl.loadCuda().addon.communicators().some((c) => c.group === communicator.name)) {
      // The heap's own communicator: rank 0's unique id over the group's gather (the transport's own group setup).
      const made = await localOutcome(`creating communicator "${communicator.name}"`, () =>
        nccl.nccl.createGroup!({ name: communicator.name, rank: member.rank, worldSize: member.worldSize, members: [], timeoutMs, allGather: gather }),
      )
      created = made.failure === undefined
      await agree(made.failure, async () => {
        await dropCommunicator()
        await freeMemory()
      })
    }
    let registered: Nccl.NcclWindow | undefined
    const register: Step = {
      label: "ncclCommWindowRegister",
      apply: async () => {
        registered = await nccl.registerNcclWindow(communicator.name, memory, { symmetric: true, timeoutMs })
      },
      undo: () => nccl.deregisterNcclWindow(registered!, { timeoutMs }),
    }
    try {
      // The comparison after the collective call takes its own limit (longer than the call's), not the front end's.
      const lockstep: AgreementGroup = { ...group, allGather: (blob, limit) => member.allGather(blob, limit) }
      await runLockstep(lockstep, what, [register], nccl.communicatorCollective(communicator.name), agreement)
    } catch (error) {
      await freeMemory()
      await dropCommunicator()
      throw error
    }
    const window = registered!
    blocksOf(member.name).add(memory)
    // Copies (t.to("cpu")) go through transport-nccl's cudaMemcpy.
    const allocator = collectiveAllocator(NAME, communicator.device, memory.allocator.copy)
    const block: SymmetricBlock = {
      device: communicator.device,
      storage: (rank, n, isFreed) => {
        if (rank !== member.rank) {
          throw new SymmetricBackendError({
            message: `an ${NAME} heap has no host-side address of rank ${rank}'s copy: NCCL reaches peers' windows from kernels and collectives (ncclWindow_t ${window.window}), not through peerTensor`,
            backend: NAME,
            reason: "unsupported",
          })
        }
        const handle = { address: window.address, device: Number(communicator.device.slice(5)), window: window.window, communicator: communicator.name }
        return deviceStorage(allocator, n, handle, isFreed)
      },
      free: async (timeoutMs = TIMEOUT_MS) => {
        // Window first, then the memory, then (the heap's own) communicator: NCCL needs them in that order.
        await nccl.deregisterNcclWindow(window, { timeoutMs })
        nccl.freeNcclMemory(memory)
        const blocks = blocksOf(member.name)
        blocks.delete(memory)
        if (blocks.size > 0) return
        liveBlocks.delete(member.name)
        if (communicator.own) await nccl.nccl.destroyGroup!(communicator.name)
      },
    }
    return block
  },
}
