/**
 * TypeScript actor and transport modules, the driver started from another working directory: the
 * relative transport path and tsx are taken from the user's modules, and every thread that imports
 * them (actor processes' main threads, every transfer agent's worker) can. On Node 22.18+ and 24
 * they load without tsx; on older Node through tsx, which the driver's main thread alone gets from
 * the command line (as `npx tsx main.ts` starts it).
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, describe, expect, it } from "vitest"

const root = fileURLToPath(new URL("..", import.meta.url))
const fixture = join(root, "test", "fixtures", "typescript")
const strips = Boolean((process.features as { typescript?: unknown }).typescript)
const tsxFlags = strips ? [] : ["--import", pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href]
const EXPECTED = "sum over object-store, tmpfile: 2048\n"

const runDriver = (main: string, cwd: string): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(process.execPath, [...tsxFlags, main], { cwd, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr }),
    )
  })

const temporary = (prefix: string): string => fs.mkdtempSync(join(os.tmpdir(), prefix))
const elsewhere = temporary("tensorlane-ts-cwd-")
const project = temporary("tensorlane-ts-project-")
afterAll(() => {
  for (const dir of [elsewhere, project]) fs.rmSync(dir, { recursive: true, force: true })
})

describe("TypeScript actor and transport modules", () => {
  it("load from the driver's folder, not the working directory, in every thread", async () => {
    const { code, stdout, stderr } = await runDriver(join(fixture, "main.ts"), elsewhere)
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout).toBe(EXPECTED)
  })

  it("the Effect face: the cluster layer takes the relative path from the module that builds it", async () => {
    const { code, stdout, stderr } = await runDriver(join(fixture, "effect.ts"), elsewhere)
    expect(stderr).toBe("")
    expect(code).toBe(0)
    expect(stdout).toBe(EXPECTED)
  })

  it(`in a project without tsx: ${strips ? "load, Node strips their types" : "fail in the thread without tsx's hooks, saying tsx is missing"}`, async () => {
    for (const name of fs.readdirSync(fixture)) fs.copyFileSync(join(fixture, name), join(project, name))
    fs.writeFileSync(join(project, "package.json"), JSON.stringify({ type: "module", private: true }))
    const links: Record<string, string> = {
      "@tensorlane/core": join(root, "packages", "core"),
      "@tensorlane-fixtures/transport-tmpfile": join(root, "test", "fixtures", "transport-tmpfile"),
      effect: fs.realpathSync(join(root, "node_modules", "effect")),
    }
    for (const [name, target] of Object.entries(links)) {
      fs.mkdirSync(join(project, "node_modules", name, ".."), { recursive: true })
      fs.symlinkSync(target, join(project, "node_modules", name))
    }
    const { code, stdout, stderr } = await runDriver(join(project, "main.ts"), elsewhere)
    if (strips) {
      expect(stderr).toBe("")
      expect(stdout).toBe(EXPECTED)
      return
    }
    expect(code).toBe(1)
    expect(stderr).toMatch(
      /TransportLoadError: cannot import transport module "file:\/\/\S+\/transport\.ts": transport module \S+\/transport\.ts is TypeScript, which Node \S+ cannot import by itself, and tsx cannot be found from it\. Install tsx in its project/,
    )
    expect(stderr).not.toContain("installed next to @tensorlane/core")
  })
})
