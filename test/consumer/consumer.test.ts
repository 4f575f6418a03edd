/**
 * The packages as a user gets them (issue #23). Verdaccio on 127.0.0.1 holds every public workspace
 * package, packed from this checkout (third-party packages come through its uplink to the registry npm
 * uses here); a fresh app in a temporary directory outside the repository installs core, transport-gloo
 * and the CLI from it with install scripts off and its own npm cache, HOME and XDG_CACHE_HOME. Every app
 * command runs in a mount and pid namespace where Debian's Gloo, the compilers, cmake and Python are
 * hidden (hidden.sh): tensors move over object-store and gloo, `tensorlane install nixl` fetches NIXL, a
 * tensor moves over nixl, and the doctor reports both ready. Verdaccio, the namespaces and the temporary
 * directory go away on success, on failure, on SIGINT/SIGTERM and when the worker exits.
 */import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"

const here = dirname(fileURLToPath(import.meta.url))
const repository = join(here, "..", "..")
const HIDDEN = join(here, "hidden.sh")

interface Result {
  readonly code: number | null
  readonly stdout: string
  /** stdout and stderr, for failure messages. */
  readonly output: string
}

const MAX_OUTPUT = 16 * 1024 * 1024
const running = new Set<ChildProcess>()

/** Runs a command to its end or its deadline (then SIGKILL); tracked so that an interrupt can end it. */
const run = (command: string, args: ReadonlyArray<string>, options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs: number }) =>
  new Promise<Result>((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] })
    running.add(child)
    let stdout = ""
    let output = ""
    const take = (isStdout: boolean) => (chunk: Buffer) => {
      if (output.length > MAX_OUTPUT) return
      if (isStdout) stdout += chunk
      output += chunk
    }
    child.stdout.on("data", take(true))
    child.stderr.on("data", take(false))
    const timer = setTimeout(() => {
      output += `\n[killed after ${options.timeoutMs} ms]`
      child.kill("SIGKILL")
    }, options.timeoutMs)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(timer)
      running.delete(child)
      resolve({ code, stdout, output: `$ ${command} ${args.join(" ")}\n${output}` })
    })
  })

const succeeded = (result: Result): string => {
  expect(result.code, result.output).toBe(0)
  return result.stdout
}

const root = fs.mkdtempSync(join(os.tmpdir(), "consumer-test-"))
const app = join(root, "app")
const empty = join(root, "empty")
let registry: ChildProcess | undefined
let registryUrl = ""

/**
 * Synchronous, for signal handlers and process exit (a vitest worker whose runner went away exits without
 * running afterAll): SIGKILL ends a namespace's every process through unshare's --kill-child.
 */
const tearDownNow = () => {
  for (const child of running) child.kill("SIGKILL")
  registry?.kill("SIGKILL")
  fs.rmSync(root, { recursive: true, force: true, maxRetries: 10 })
}
const onSignal = (signal: NodeJS.Signals) => {
  tearDownNow()
  process.exit(128 + os.constants.signals[signal])
}
process.once("SIGINT", onSignal)
process.once("SIGTERM", onSignal)
process.once("exit", tearDownNow)

/** The environment of a user's shell: nothing from this repository, npm's run or Python; the machine's TLS and proxy settings kept. */
const userEnv = (): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(
    Object.entries(process.env).filter(([key]) => /^(NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR|(https?|no|all)_proxy)$/i.test(key)),
  ),
  PATH: [dirname(process.execPath), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"].join(":"),
  HOME: join(root, "home"),
  XDG_CACHE_HOME: join(root, "cache"),
  TMPDIR: join(root, "tmp"),
  npm_config_userconfig: join(root, "npmrc"),
  npm_config_cache: join(root, "npm-cache"),
  npm_config_update_notifier: "false",
  npm_config_audit: "false",
  npm_config_fund: "false",
})

/** A command in the app, in a fresh mount and pid namespace where hidden.sh hid Gloo, the compilers, cmake and Python. */
const inApp = (args: ReadonlyArray<string>, timeoutMs: number) =>
  run(
    "setpriv",
    [
      "--pdeathsig=KILL",
      ...["unshare", "--mount", "--propagation=private", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc"],
      ...["bash", HIDDEN, empty, ...args],
    ],
    { cwd: app, env: userEnv(), timeoutMs },
  )

const startRegistry = async (): Promise<string> => {
  // Third-party packages come from the registry this machine's npm uses.
  const uplink = succeeded(await run("npm", ["config", "get", "registry"], { cwd: repository, timeoutMs: 30_000 })).trim()
  const config = join(root, "registry.yaml")
  fs.writeFileSync(
    config,
    [
      `storage: ${join(root, "storage")}`,
      `auth: { htpasswd: { file: ${join(root, "htpasswd")} } }`,
      `uplinks: { npm: { url: "${uplink}" } }`,
      "packages:",
      // tensorlane's packages come from this checkout alone, never from the uplink.
      `  "@tensorlane/*": { access: $all, publish: $authenticated }`,
      `  "**": { access: $all, proxy: npm }`,
      "log: { type: stdout, format: pretty, level: warn }",
    ].join("\n"),
  )
  const child = spawn("setpriv", ["--pdeathsig=KILL", process.execPath, join(here, "registry.mjs"), config], {
    cwd: repository,
    stdio: ["ignore", "pipe", "inherit"],
  })
  registry = child
  const port = await new Promise<number>((resolve, reject) => {
    let seen = ""
    const timer = setTimeout(() => reject(new Error(`Verdaccio did not listen within 30 s: ${seen}`)), 30_000)
    child.stdout.on("data", (chunk: Buffer) => {
      seen += chunk
      const line = /^\{"port":\d+\}$/m.exec(seen)
      if (line === null) return
      clearTimeout(timer)
      resolve((JSON.parse(line[0]) as { port: number }).port)
    })
    child.on("exit", (code) => reject(new Error(`Verdaccio exited (${code}): ${seen}`)))
  })
  const url = `http://127.0.0.1:${port}/`
  const response = await fetch(`${url}-/user/org.couchdb.user:consumer`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "consumer", password: `consumer-${process.pid}` }),
  })
  const { token } = (await response.json()) as { token: string }
  fs.writeFileSync(join(root, "npmrc"), `registry=${url}\n//127.0.0.1:${port}/:_authToken=${token}\n`)
  return url
}

interface Packed {
  readonly name: string
  readonly filename: string
  readonly size: number
  readonly unpackedSize: number
  readonly integrity: string
}

/** Every non-private workspace package as npm packs it, with the tarball sizes printed for the record. */
const packWorkspaces = async (): Promise<ReadonlyArray<Packed>> => {
  const workspaces = JSON.parse(succeeded(await run("npm", ["query", ".workspace"], { cwd: repository, timeoutMs: 60_000 }))) as Array<{
    path: string
    private?: boolean
  }>
  const publicOnes = workspaces.filter((w) => w.private !== true).map((w) => w.path)
  const tarballs = join(root, "tarballs")
  fs.mkdirSync(tarballs)
  const packed = JSON.parse(
    succeeded(
      await run("npm", ["pack", ...publicOnes, "--pack-destination", tarballs, "--json", "--ignore-scripts"], { cwd: repository, timeoutMs: 120_000 }),
    ),
  ) as Array<Packed>
  console.log(
    packed.map((p) => `${p.name.padEnd(44)} ${(p.size / 1024).toFixed(0).padStart(7)} KiB packed ${(p.unpackedSize / 1024).toFixed(0).padStart(7)} KiB unpacked`).join("\n"),
  )
  return packed.map((p) => ({ ...p, filename: join(tarballs, p.filename) }))
}

let packed: ReadonlyArray<Packed> = []

beforeAll(async () => {
  for (const dir of ["home", "cache", "tmp", "npm-cache", "app"]) fs.mkdirSync(join(root, dir))
  fs.writeFileSync(empty, "", { mode: 0o644 })
  registryUrl = await startRegistry()
  packed = await packWorkspaces()
  for (const p of packed) succeeded(await run("npm", ["publish", p.filename, "--ignore-scripts"], { cwd: root, env: userEnv(), timeoutMs: 60_000 }))
  fs.writeFileSync(join(app, "package.json"), `${JSON.stringify({ name: "consumer-app", private: true, type: "module" }, null, 2)}\n`)
  for (const file of fs.readdirSync(join(here, "app"))) fs.copyFileSync(join(here, "app", file), join(app, file))
}, 240_000)

afterAll(async () => {
  process.removeListener("SIGINT", onSignal)
  process.removeListener("SIGTERM", onSignal)
  process.removeListener("exit", tearDownNow)
  const exited = registry === undefined || registry.exitCode !== null ? Promise.resolve() : new Promise((resolve) => registry!.once("exit", resolve))
  registry?.kill("SIGTERM")
  await exited
  tearDownNow()
  expect(fs.existsSync(root)).toBe(false)
})

const installed = (name: string) => {
  const lock = JSON.parse(fs.readFileSync(join(app, "package-lock.json"), "utf8")) as {
    packages: Record<string, { resolved?: string; integrity?: string }>
  }
  return lock.packages[`node_modules/${name}`]
}

describe("a fresh app, installed from a local registry, on a machine without Gloo, compilers or Python", () => {
  it("the namespace hides Debian's libgloo, cc, gcc, g++, c++, make, cmake and python3", async () => {
    const probe = 'try { process.dlopen({ exports: {} }, "libgloo.so.0") } catch (error) { console.log(error.message) }'
    expect(succeeded(await inApp(["node", "-e", probe], 30_000))).toMatch(/libgloo\.so\.0: file too short/)
    const found = await inApp(["bash", "-c", "type -ap cc gcc g++ c++ make cmake python3"], 30_000)
    expect(found.stdout).toBe("")
  })

  it("installs @tensorlane/core, transport-gloo and the CLI with install scripts off, the tarballs packed here", async () => {
    succeeded(await inApp(["npm", "install", "@tensorlane/core", "@tensorlane/transport-gloo", "@tensorlane/cli", "--ignore-scripts"], 180_000))
    for (const name of ["@tensorlane/core", "@tensorlane/transport-gloo", "@tensorlane/cli"]) {
      const entry = installed(name)
      expect(entry?.resolved?.startsWith(registryUrl), name).toBe(true)
      expect(entry?.integrity, name).toBe(packed.find((p) => p.name === name)?.integrity)
    }
  })

  it("moves a tensor between two actors over object-store", async () => {
    expect(succeeded(await inApp(["node", "transfer.mjs", "object-store"], 60_000))).toMatch(/^object-store: 4000000 bytes moved/m)
  })

  it("moves a tensor between two actors over gloo, from the platform package", async () => {
    expect(succeeded(await inApp(["node", "transfer.mjs", "gloo"], 60_000))).toMatch(/^gloo: 4000000 bytes moved/m)
  })

  it("the fix the doctor names for a missing NIXL fetches it without Python, and a tensor moves over nixl", async () => {
    succeeded(await inApp(["npm", "install", "@tensorlane/transport-nixl", "--ignore-scripts"], 120_000))
    const before = JSON.parse(succeeded(await inApp(["npx", "--no", "tensorlane", "doctor", "--json"], 120_000))) as {
      packages: Array<{ packageName: string; state: string; fix?: string }>
    }
    const missing = before.packages.find((p) => p.packageName === "@tensorlane/transport-nixl")
    expect(missing).toMatchObject({ state: "missing library", fix: expect.stringMatching(/^npx -p @tensorlane\/cli tensorlane install nixl, /) })
    console.log(succeeded(await inApp(missing!.fix!.split(",")[0]!.split(" "), 240_000)))
    expect(succeeded(await inApp(["node", "transfer.mjs", "nixl"], 60_000))).toMatch(/^nixl: 4000000 bytes moved/m)
  })

  it("the fixes' command runs the CLI where the project has not installed it, from the registry", async () => {
    const bare = join(root, "bare")
    fs.mkdirSync(bare)
    const help = await inApp(["bash", "-c", `cd ${bare} && npx -p @tensorlane/cli tensorlane install`], 180_000)
    expect(help.output).toMatch(/tensorlane install needs a target: /)
    expect(fs.existsSync(join(bare, "node_modules"))).toBe(false)
  })

  it("the doctor reports gloo and nixl ready, their libraries from the app and the user's cache", async () => {
    const report = JSON.parse(succeeded(await inApp(["npx", "--no", "tensorlane", "doctor", "--json"], 120_000))) as {
      packages: Array<{ packageName: string; state: string; details: Array<[string, string]> }>
    }
    const byName = new Map(report.packages.map((p) => [p.packageName, p]))
    const gloo = byName.get("@tensorlane/transport-gloo")
    const nixl = byName.get("@tensorlane/transport-nixl")
    expect(gloo?.state).toBe("ready")
    expect(new Map(gloo?.details).get("gloo")).toContain(join(app, "node_modules"))
    expect(nixl?.state).toBe("ready")
    expect(new Map(nixl?.details).get("libnixl_capi")).toContain(join(root, "cache", "tensorlane", "libraries"))
  })
})
