/** Every runnable example under examples/ runs to completion and prints what it promises. */
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const run = promisify(execFile)
const root = fileURLToPath(new URL("..", import.meta.url))

const examples: ReadonlyArray<readonly [string, RegExp]> = [
  ["quickstart/main.ts", /the driver's copy agrees: true[\s\S]*after release: 0 objects tracked, 0 tensors held by any process/],
  ["gloo/random-tensor-sum.ts", /^sum: -?\d+\.\d{3}$/m],
  ["gloo/tensor-dict.ts", /^sum of both tensors: -?\d+\.\d{3}$/m],
  ["gloo/pass-back-to-producer.ts", /^same sums: true$/m],
  ["gloo/get.ts", /^UnsupportedOperationError: .*useObjectStore: true[\s\S]*^copy: Tensor\(float32, \[1000, 1000\], cpu\)/m],
  ["gloo/mutability.ts", /^sender and receiver returned different sums$/m],
  ["gloo/wait-tensor-freed.ts", /^sender and receiver returned the same sums$/m],
  ["gloo/destroy-recreate.ts", /round 1: sum[\s\S]*round 2: sum/],
]

describe("examples", () => {
  it.each(examples)("%s", async (file, expected) => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", `examples/${file}`], { cwd: root, timeout: 60_000 })
    expect(stdout).toMatch(expected)
  })
})
