/** Runs the built command (dist/main.js) as a user would, and returns what it printed and its exit code. */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

export const MAIN = fileURLToPath(new URL("../dist/main.js", import.meta.url))

export interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

export const tensorlane = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env, cwd?: string): Promise<Run> =>
  new Promise((resolve) => {
    execFile(process.execPath, ["--expose-gc", MAIN, ...args], { env, cwd, timeout: 110_000, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resolve({ code, stdout, stderr })
    })
  })
