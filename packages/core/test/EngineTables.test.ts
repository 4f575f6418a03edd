/**
 * The tables of Effect's cluster engine are each cluster's own, so that clusters sharing a Postgres
 * database never take each other's hosts' shards: named after the cluster while the longest table
 * name fits Postgres' 63 characters, else after a digest of its name.
 */
import { describe, expect, it } from "vitest"
import { engineTablePrefix } from "../src/internal/engine.js"

const LONGEST_TABLE = "_runner_migrations"

describe("engineTablePrefix", () => {
  it("names the tables after the cluster, its dashes as underscores", () => {
    expect(engineTablePrefix("tensorlane")).toBe("tensorlane_tensorlane")
    expect(engineTablePrefix("lab-2")).toBe("tensorlane_lab_2")
    expect(engineTablePrefix("lab-2")).not.toBe(engineTablePrefix("lab-3"))
  })

  it("takes a digest of a name too long for Postgres' identifiers, distinct for names that share their start", () => {
    const long = (last: string) => `${"a".repeat(62)}${last}`
    const prefixes = [long("b"), long("c"), "a".repeat(34)].map(engineTablePrefix)
    for (const prefix of prefixes) {
      expect(prefix).toMatch(/^tensorlane_[a-z0-9_]+$/)
      expect(prefix.length + LONGEST_TABLE.length).toBeLessThanOrEqual(63)
    }
    expect(new Set(prefixes).size).toBe(3)
    expect(prefixes[2]).toBe(`tensorlane_${"a".repeat(34)}`)
    expect(engineTablePrefix("a".repeat(35))).toMatch(/^tensorlane_[0-9a-f]{16}$/)
  })
})
