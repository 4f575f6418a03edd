/** The environment actor processes start with (internal/actorLaunch.ts): glibc's huge pages on, a user's own setting kept. */
import { expect, it } from "vitest"
import { actorEnvironment } from "../src/internal/actorLaunch.js"

it("turns glibc's huge pages on where the environment names no tunables, or empty ones", () => {
  expect(actorEnvironment({ PATH: "/bin" })).toEqual({ PATH: "/bin", GLIBC_TUNABLES: "glibc.malloc.hugetlb=1" })
  expect(actorEnvironment({ GLIBC_TUNABLES: "" })).toEqual({ GLIBC_TUNABLES: "glibc.malloc.hugetlb=1" })
})

it("adds the tunable after the environment's others", () => {
  expect(actorEnvironment({ GLIBC_TUNABLES: "glibc.malloc.arena_max=2" }).GLIBC_TUNABLES).toBe("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1")
})

it("keeps the environment's own value of the tunable", () => {
  for (const tunables of ["glibc.malloc.hugetlb=0", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2"]) {
    expect(actorEnvironment({ GLIBC_TUNABLES: tunables }).GLIBC_TUNABLES).toBe(tunables)
  }
})
