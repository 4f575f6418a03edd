/**
 * The Ray walkthrough of examples/gloo on two hosts: each example runs unchanged but for joining
 * the cluster and placing its two actors on h1 and h2, and prints what it prints on one machine.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { GLOO_EXAMPLES } from "../fixtures/exampleOutputs.ts"
import { harnessUnavailable } from "./harness.ts"
import { useHosts } from "./nodes.ts"

const unavailable = harnessUnavailable()
if (unavailable !== undefined) console.warn(`skipping the multi-host examples: ${unavailable}`)

const run = promisify(execFile)
const EXAMPLES = fileURLToPath(new URL("../../examples/", import.meta.url))
const CORE = fileURLToPath(new URL("../../packages/core/dist/index.js", import.meta.url))

/** The example's source with its placement changed: it joins the cluster and puts its two actors on h1 and h2. */
const placed = (source: string, clusterFile: string, file: string): string => {
  const changed = source
    .replace("await start({ ", `await start({ cluster: ${JSON.stringify(clusterFile)}, `)
    .replace("{ count: 2 }", `{ count: 2, hosts: ["h1", "h2"] }`)
    // The copy lives outside the repository: its imports by absolute path.
    .replace(`from "@tensorlane/core"`, `from ${JSON.stringify(CORE)}`)
    .replace(`from "./actors.ts"`, `from ${JSON.stringify(path.join(path.dirname(file), "actors.ts"))}`)
  expect(changed.match(/cluster: |hosts: \["h1", "h2"\]/g)).toHaveLength(2)
  return changed
}

describe.skipIf(unavailable !== undefined)("examples/gloo across two hosts", () => {
  const hosts = useHosts({ hosts: 2 })

  it.each(GLOO_EXAMPLES)("%s", async (example, expected) => {
    const file = path.join(EXAMPLES, example)
    // .mts: outside the repository no package.json makes the copy an ES module.
    const copy = path.join(hosts.env.folder, path.basename(example).replace(/\.ts$/, ".mts"))
    fs.writeFileSync(copy, placed(fs.readFileSync(file, "utf8"), hosts.env.clusterFile, file))
    const { stdout } = await run(process.execPath, ["--import", "tsx", copy], { cwd: path.dirname(file), timeout: 60_000 })
    expect(stdout).toMatch(expected)
  })
})
