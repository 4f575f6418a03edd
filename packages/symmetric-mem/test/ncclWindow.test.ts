/**
 * The nccl-window backend without @tensorlane/transport-nccl: a child process in which the package
 * cannot be resolved (a resolve hook resolves it from outside the project, as if it were not
 * installed) allocates on a one-rank group and gets SymmetricBackendError "needs-package". The
 * backend with transport-nccl runs across processes in test/symmetricNccl.test.ts (test doubles)
 * and test/symmetric.test.ts (the real wheel: NoCudaDeviceError).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"

const backend = new URL("../src/internal/ncclWindowBackend.ts", import.meta.url).pathname

const run = (hidden: boolean): unknown => {
  const dir = fs.mkdtempSync(join(os.tmpdir(), "symmetric-no-nccl-"))
  try {
    const hooks = join(dir, "hooks.mjs")
    fs.writeFileSync(
      hooks,
      `export async function resolve(specifier, context, next) {
        if (${hidden} && specifier === "@tensorlane/transport-nccl") return next(specifier, { ...context, parentURL: "file:///" })
        return next(specifier, context)
      }`,
    )
    fs.writeFileSync(join(dir, "register.mjs"), `import { register } from "node:module"\nregister(${JSON.stringify(`file://${hooks}`)})`)
    const script = join(dir, "main.mts")
    fs.writeFileSync(
      script,
      `import { ncclWindowBackend } from ${JSON.stringify(backend)}
      const member = { name: "g", backend: "shm", rank: 0, worldSize: 1, allGather: async (b) => [b] }
      ncclWindowBackend.allocate(member, 64, async (b) => [b], {}).then(
        () => console.log(JSON.stringify({ ok: true })),
        (e) => console.log(JSON.stringify({ tag: e._tag, reason: e.reason, message: e.message })),
      )`,
    )
    const out = execFileSync(process.execPath, ["--import", "tsx", "--import", join(dir, "register.mjs"), script], {
      cwd: new URL("..", import.meta.url).pathname,
      encoding: "utf8",
      env: { ...process.env, TENSORLANE_NCCL_LIBRARY: "/nonexistent/libnccl.so.2" },
    })
    return JSON.parse(out.trim().split("\n").at(-1)!)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

describe("nccl-window without @tensorlane/transport-nccl", () => {
  it("is refused with SymmetricBackendError needs-package naming the package and how to install it", () => {
    expect(run(true)).toEqual({
      tag: "SymmetricBackendError",
      reason: "needs-package",
      message: expect.stringContaining("npm install @tensorlane/transport-nccl"),
    })
  })

  it("with the package resolvable, the same child gets past the import (to transport-nccl's missing-library error)", () => {
    expect(run(false)).toMatchObject({ tag: "NativeLibraryError", message: expect.stringContaining("/nonexistent/libnccl.so.2") })
  })
})
