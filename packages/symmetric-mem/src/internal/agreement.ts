/**
 * The one gather behind every collective call: each rank states what it is doing (which call, on
 * which heap, what size or which allocations), and every rank runs the same checks on the same
 * statements, so a disagreement fails on every rank with the same SymmetricMismatchError.
 */
import { gatherJson } from "@tensorlane/core/plugin"
import type { Gather } from "../Backend.js"
import { SymmetricMismatchError } from "../Errors.js"

export type Statement =
  | {
      readonly op: "allocate"
      readonly seq: number
      readonly heap: string
      readonly digest: string
      readonly bytes: number
      readonly shape: ReadonlyArray<number>
      readonly dtype: string
      readonly makeSymmetric: boolean
      /** Stated like makeSymmetric, so that ranks that differ in it fail here instead of desynchronising. */
      readonly skipSymmetricCheck: boolean
      readonly error?: string
    }
  | { readonly op: "free"; readonly seq: number; readonly heap: string; readonly ids: ReadonlyArray<number>; readonly error?: string }

const isStatement = (value: unknown): boolean => {
  const s = value as Partial<Statement> | null
  return typeof s === "object" && s !== null && (s.op === "allocate" || s.op === "free") && typeof s.seq === "number" && typeof s.heap === "string"
}

const describe = (s: Statement): string => (s.op === "allocate" ? `allocateSymmetric #${s.seq}` : `freeSymmetric #${s.seq}`)

/**
 * Gathers `mine` and checks what every collective call needs; returns every rank's statement. A
 * rank that stated an error (it refused the call locally) fails the others with what "peer".
 */
export const agree = async (group: string, rank: number, mine: Statement, gather: Gather): Promise<ReadonlyArray<Statement>> => {
  const all = await gatherJson<Statement>({ name: group, allGather: gather }, mine, { check: isStatement })
  const fail = (what: SymmetricMismatchError["what"], message: string): never => {
    throw new SymmetricMismatchError({ message: `${describe(mine)} in group "${group}" (rank ${rank}): ${message}`, group, what })
  }
  const refused = all.map((s, r) => [r, s] as const).filter(([, s]) => s.error !== undefined)
  if (refused.length > 0) fail("peer", refused.map(([r, s]) => `rank ${r} refused: ${s.error}`).join("; "))
  if (all.some((s) => s.op !== mine.op || s.seq !== mine.seq)) {
    fail("order", `the ranks are at different calls (${all.map((s, r) => `rank ${r}: ${describe(s)}`).join(", ")}); every rank must make the same collective calls in the same order`)
  }
  if (all.some((s) => s.heap !== mine.heap)) fail("heap", "the ranks do not share one heap (was the group re-created on some ranks only?)")
  if (mine.op === "allocate") {
    const allocations = all as ReadonlyArray<Extract<Statement, { op: "allocate" }>>
    for (const option of ["makeSymmetric", "skipSymmetricCheck"] as const) {
      if (allocations.some((s) => s[option] !== mine[option])) fail("options", `${option} differs across ranks: ${allocations.map((s, r) => `rank ${r} ${s[option]}`).join(", ")}`)
    }
    if (allocations.some((s) => s.digest !== mine.digest)) fail("order", "the ranks' heaps are in different states (earlier allocations or frees differ)")
    const sizes = allocations.map((s) => s.bytes)
    if (!mine.makeSymmetric && sizes.some((n) => n !== sizes[0])) {
      fail(
        "size",
        `the ranks ask for different sizes (${allocations.map((s, r) => `rank ${r}: ${s.dtype} [${s.shape.join(", ")}] = ${s.bytes} bytes`).join("; ")}); pass makeSymmetric: true to give every rank a buffer of the largest size`,
      )
    }
  } else {
    const frees = all as ReadonlyArray<Extract<Statement, { op: "free" }>>
    const ids = JSON.stringify(mine.ids)
    if (frees.some((s) => JSON.stringify(s.ids) !== ids)) {
      fail("order", `the ranks free different allocations (${frees.map((s, r) => `rank ${r}: #${s.ids.join(", #")}`).join("; ")}); free the same tensors in the same order on every rank`)
    }
  }
  return all
}
