/**
 * An actor process that cannot be started (its launcher not found, no file descriptor left): the
 * spawn fails with ActorDiedError saying why, and the driver and its cluster go on.
 */
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { ActorDiedError, type Cluster, start } from "@tensorlane/core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Helper } from "./fixtures/actors.mjs"
import { isGone, rejection } from "./helpers.ts"

const EMFILE_DRIVER = fileURLToPath(new URL("./fixtures/emfile-driver.mjs", import.meta.url))

describe("an actor process that cannot be started", () => {
  let cluster: Cluster
  beforeAll(async () => {
    cluster = await start()
  })
  afterAll(async () => {
    await cluster?.shutdown()
  })

  it("its launcher not found (ENOENT): the spawn fails with ActorDiedError, and the cluster spawns and calls on", async () => {
    // The launcher (setpriv, or Node itself) is looked up on the actor's PATH.
    const error = await rejection(cluster.spawn(Helper, { count: 2, env: { PATH: "/nonexistent" } }))
    expect(error).toBeInstanceOf(ActorDiedError)
    expect((error as ActorDiedError).message).toMatch(/could not be started \(spawn \S+ ENOENT\)/)
    const [helper] = await cluster.spawn(Helper)
    const pid = await cluster.get(helper!.pid())
    expect(isGone(pid)).toBe(false)
  })

  it("no file descriptor left for its control connection (EMFILE): the spawn fails with ActorDiedError, and the next one works", () => {
    const out = execFileSync("prlimit", ["--nofile=1024:1024", process.execPath, EMFILE_DRIVER], { encoding: "utf8", timeout: 60_000 })
    const { failure, pid } = JSON.parse(out.trim().split("\n").at(-1)!) as { failure: { tag: string; message: string } | undefined; pid: number }
    expect(failure?.tag).toBe("ActorDiedError")
    expect(failure?.message).toMatch(/could not be started \(spawn \S+ EMFILE\)/)
    expect(pid).toBeGreaterThan(0)
  }, 60_000)
})
