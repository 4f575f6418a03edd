/**
 * The symmetric-heap backends by name: `shm`, `nvshmem` and `nccl-window` (whose NCCL code comes
 * from the optional peer @tensorlane/transport-nccl, imported on first use); other packages may add
 * theirs with registerSymmetricBackend. A group created with backend "shm" defaults to `shm`, one
 * created with "nccl" to `nccl-window`.
 */
import type { GroupMember } from "@tensorlane/core"
import type { SymmetricBackend } from "./Backend.js"
import { SymmetricBackendError } from "./Errors.js"
import { ncclWindowBackend } from "./internal/ncclWindowBackend.js"
import { nvshmemBackend } from "./internal/nvshmemBackend.js"
import { shmBackend } from "./internal/shmBackend.js"

export type BackendName = "shm" | "nvshmem" | "nccl-window"

const backends = new Map<string, SymmetricBackend>([
  [shmBackend.name, shmBackend],
  [nvshmemBackend.name, nvshmemBackend],
  [ncclWindowBackend.name, ncclWindowBackend],
])

/** The symmetric backend of a group created with the group backend named. */
const GROUP_DEFAULTS: Readonly<Record<string, string>> = { shm: "shm", nccl: "nccl-window" }

/** For packages that provide a backend of their own; replaces an earlier one of the same name. */
export const registerSymmetricBackend = (backend: SymmetricBackend): void => {
  backends.set(backend.name, backend)
}

/** The backend named, or the group's default (an shm group's `shm`, an nccl group's `nccl-window`). */
export const backendFor = (name: string | undefined, member: GroupMember): SymmetricBackend => {
  const wanted = name ?? GROUP_DEFAULTS[member.backend]
  if (wanted === undefined) {
    throw new SymmetricBackendError({
      message: `group "${member.name}" has backend ${member.backend}, which holds no symmetric heap: pass backend ("nvshmem" or "nccl-window"), or allocate in a group created with { backend: "shm" } or { backend: "nccl" }`,
      backend: member.backend,
      reason: "wrong-group",
    })
  }
  const backend = backends.get(wanted)
  if (backend !== undefined) return backend
  throw new SymmetricBackendError({
    message: `unknown symmetric backend "${wanted}"; known: ${[...backends.keys()].join(", ")}`,
    backend: wanted,
    reason: "unsupported",
  })
}
