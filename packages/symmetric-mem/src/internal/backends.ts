/**
 * The symmetric-heap backends by name. `shm` and `nvshmem` ship with this package; `nccl-window`
 * comes from @tensorlane/transport-nccl, which registers it (registerSymmetricBackend) when imported.
 */
import type { GroupMember } from "@tensorlane/core"
import type { SymmetricBackend } from "../Backend.js"
import { SymmetricBackendError } from "../Errors.js"
import { nvshmemBackend } from "./nvshmemBackend.js"
import { shmBackend } from "./shmBackend.js"

export type BackendName = "shm" | "nvshmem" | "nccl-window"

const backends = new Map<string, SymmetricBackend>([
  [shmBackend.name, shmBackend],
  [nvshmemBackend.name, nvshmemBackend],
])

const PROVIDERS: Readonly<Record<string, string>> = { "nccl-window": "@tensorlane/transport-nccl" }

/** For packages that provide a backend (transport-nccl's nccl-window); replaces an earlier one of the same name. */
export const registerSymmetricBackend = (backend: SymmetricBackend): void => {
  backends.set(backend.name, backend)
}

/** The backend named, or the group's own when it is a symmetric backend (an shm group). */
export const backendFor = (name: string | undefined, member: GroupMember): SymmetricBackend => {
  const wanted = name ?? (backends.has(member.backend) ? member.backend : undefined)
  if (wanted === undefined) {
    throw new SymmetricBackendError({
      message: `group "${member.name}" has backend ${member.backend}, which holds no symmetric heap: pass backend ("nvshmem" or "nccl-window"), or allocate in a group created with { backend: "shm" }`,
      backend: member.backend,
      reason: "wrong-group",
    })
  }
  const backend = backends.get(wanted)
  if (backend !== undefined) return backend
  const provider = PROVIDERS[wanted]
  if (provider !== undefined) {
    throw new SymmetricBackendError({
      message: `the ${wanted} backend needs ${provider}: install it and import it in the actor's module (it registers ${wanted} with registerSymmetricBackend)`,
      backend: wanted,
      reason: "needs-package",
    })
  }
  throw new SymmetricBackendError({
    message: `unknown symmetric backend "${wanted}"; known: ${[...backends.keys(), ...Object.keys(PROVIDERS).filter((p) => !backends.has(p))].join(", ")}`,
    backend: wanted,
    reason: "unsupported",
  })
}
