/**
 * The guides under docs/ cannot drift from code that runs: every code block follows a
 * `<!-- snippet: <path> -->` line and equals that file (and so does every TypeScript block of the
 * README, each a file under examples/); every file under docs/snippets is shown by a
 * guide and either runs here, runs in the GPU suite (docs.gpu.test.ts), or is an actor module the
 * programs load; the snippets type-check; files shown from elsewhere are run by the test named for them.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"

const run = promisify(execFile)
const root = fileURLToPath(new URL("..", import.meta.url))
const docsDir = join(root, "docs")
const snippetsDir = join(docsDir, "snippets")

/** Snippets that are programs: what each prints. */
const PROGRAMS: ReadonlyArray<readonly [string, RegExp]> = [
  ["custom-transport.ts", /^sum over tcp: 1048576\ndriver copy: Tensor\(float32, \[1048576\], cpu\)/m],
  ["custom-transport-effect.ts", /^sum over tcp-effect: 1048576\ntransports: object-store, (gloo, tcp-effect|tcp-effect, gloo)$/m],
  ["cpu-pool.ts", /^pool: 786432 of 1048576 bytes used, b\.sum\(\) = 65536\nOutOfMemoryError: .*capacity 1048576 bytes.*\nafter freeing a: 262144 bytes used$/m],
  ["effect-pool.ts", /^activations: 262144 bytes used, sum 65536$/m],
  ["nixl-pool.ts", /^registered: true, 4194304 bytes used, sum 2097152\nafter close: registered false$/m],
  ["registration.ts", /^pinned: 1 reference\nshard sum: 32768\nregistrations of the owner: 1\nafter unpinning: 1 reference \(the shard's object\)\nupdated sum: 524288$/m],
  ["failures.ts", /^ApplicationError \(RangeError in Worker-0\.fail\): .*no such shard\nTimeoutError after 100 ms\nActorDiedError: Worker-1\na still answers: 4$/m],
  ["symmetric-heap.ts", /^shapes: \[\[1,4\],\[2,4\],\[3,4\]\]\nsums: 12, 8, 24$/m],
  ["status.ts", /^gloo \S+ from \S*libgloo\S*\nnixl from \S+libnixl_capi\.so$/m],
]
/** Programs that need GPUs: type-checked here, run by the GPU suite. */
const GPU_PROGRAMS = ["nccl-pool.ts"]
const GPU_SUITE = "test/docs.gpu.test.ts"
/** Actor modules that the programs load. */
const MODULES = ["actors.ts", "weights.ts", "heap.ts", "ncclTrainer.ts"]
/** Files shown from outside docs/snippets, and the test that runs each. */
const RUN_ELSEWHERE: Readonly<Record<string, string>> = {
  "examples/transport-tcp/index.mjs": "test/customTransport.test.ts",
  "examples/transport-tcp/protocol.mjs": "test/customTransport.test.ts",
  "examples/transport-tcp/effect.mjs": "test/customTransport.test.ts",
  "examples/transport-tcp/package.json": "packages/cli/test/doctor.test.ts",
}

interface Block {
  readonly doc: string
  readonly line: number
  readonly snippet: string | undefined
  readonly body: string
}

const blocksOf = (doc: string): ReadonlyArray<Block> => {
  const lines = fs.readFileSync(join(docsDir, doc), "utf8").split("\n")
  const blocks: Array<Block> = []
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith("```")) continue
    const end = lines.indexOf("```", i + 1)
    if (end < 0) throw new Error(`${doc}:${i + 1}: unclosed code block`)
    const marker = /^<!-- snippet: (\S+) -->$/.exec(lines[i - 1] ?? "")
    blocks.push({ doc, line: i + 1, snippet: marker?.[1], body: lines.slice(i + 1, end).join("\n") })
    i = end
  }
  return blocks
}

const guides = fs.readdirSync(docsDir).filter((name) => name.endsWith(".md"))
const blocks = guides.flatMap(blocksOf)

describe("docs", () => {
  it.each(guides)("every code block of %s is a snippet file, verbatim", (doc) => {
    for (const block of blocks.filter((b) => b.doc === doc)) {
      const where = `${doc}:${block.line}`
      expect(block.snippet, `${where}: a code block without <!-- snippet: path -->`).toBeDefined()
      expect(block.snippet, where).toMatch(/^(docs\/snippets|examples)\//)
      const file = fs.readFileSync(join(root, block.snippet!), "utf8")
      expect(block.body, `${where} differs from ${block.snippet}`).toBe(file.replace(/\n+$/, ""))
    }
  })

  it("every snippet file is shown in a guide, and is a program run here or in the GPU suite, or a module they load", () => {
    const shown = new Set(blocks.map((b) => b.snippet))
    const files = fs.readdirSync(snippetsDir).filter((name) => name.endsWith(".ts"))
    for (const name of files) expect(shown.has(`docs/snippets/${name}`), `docs/snippets/${name} is in no guide`).toBe(true)
    expect([...files].sort()).toEqual([...PROGRAMS.map(([name]) => name), ...GPU_PROGRAMS, ...MODULES].sort())
    const gpuSuite = fs.readFileSync(join(root, GPU_SUITE), "utf8")
    for (const name of GPU_PROGRAMS) expect(gpuSuite, `${GPU_SUITE} does not run ${name}`).toContain(`runSnippet("${name}")`)
    for (const path of [...shown].filter((p) => !p!.startsWith("docs/snippets/"))) {
      const test = RUN_ELSEWHERE[path!]
      expect(test, `${path} is shown, and no test is named as running it`).toBeDefined()
      const pkg = JSON.parse(fs.readFileSync(join(root, path!, "..", "package.json"), "utf8")) as { name: string }
      expect(fs.readFileSync(join(root, test), "utf8")).toContain(pkg.name)
    }
  })

  it("every TypeScript block of the README is a file under examples/, verbatim (test/examples.test.ts runs them)", () => {
    const readme = fs.readFileSync(join(root, "README.md"), "utf8").split("\n")
    const typescript = blocksOf(join("..", "README.md")).filter((b) => readme[b.line - 1] === "```ts")
    expect(typescript.length).toBeGreaterThan(0)
    for (const block of typescript) {
      const where = `README.md:${block.line}`
      expect(block.snippet, `${where}: a TypeScript block without <!-- snippet: examples/... -->`).toMatch(/^examples\//)
      expect(block.body, `${where} differs from ${block.snippet}`).toBe(fs.readFileSync(join(root, block.snippet!), "utf8").replace(/\n+$/, ""))
    }
  })

  it.each(PROGRAMS)("docs/snippets/%s runs and prints what the guide says", async (name, expected) => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", join(snippetsDir, name)], { cwd: root, timeout: 60_000 })
    expect(stdout).toMatch(expected)
  })

  it("the snippets type-check", async () => {
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
    await expect(run(process.execPath, [tsc, "-p", join(snippetsDir, "tsconfig.json")], { cwd: root, timeout: 120_000 })).resolves.toBeDefined()
  })
})
