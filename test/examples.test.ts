/** Every runnable example under examples/ runs to completion and prints what it promises. */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { GLOO_EXAMPLES } from "./fixtures/exampleOutputs.ts"

const run = promisify(execFile)
const root = fileURLToPath(new URL("..", import.meta.url))

const examples: ReadonlyArray<readonly [string, RegExp]> = [
  ["quickstart/main.ts", /the driver's copy agrees: true[\s\S]*after release: 0 objects tracked, 0 tensors held by any process/],
  ["quickstart/effect.ts", /^sum computed by the receiver: -?\d+\.\d{3}; the driver's copy agrees: true$/m],
  ...GLOO_EXAMPLES,
  ["symmetric/allocate-free.ts", /^rank 0: a float32 \[3, 3\] sum 0, b float64 \[3, 3\] sum 4\.5\n.*\nrank 2: a float32 \[3, 3\] sum 18, b float64 \[3, 3\] sum 4\.5$/m],
  ["symmetric/make-symmetric.ts", /makeSymmetric: false\n(  rank \d: SymmetricMismatchError: .*different sizes.*\n){3}makeSymmetric: true\n  rank 0: float32 \[3, 3\], 36 bytes visible\n  rank 1: float32 \[2, 3\], 24 bytes visible\n  rank 2: float32 \[2, 3\], 24 bytes visible/],
  ["symmetric/one-sided.ts", /^rank 0 holds \[2,2,2,2\]\nrank 1 holds \[0,0,0,0\]\nrank 2 holds \[1,1,1,1\]\nrank 0 sums rank 2's heap tensor: 3000$/m],
]

describe("examples", () => {
  it.each(examples)("%s", async (file, expected) => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", `examples/${file}`], { cwd: root, timeout: 60_000 })
    expect(stdout).toMatch(expected)
  })
})
