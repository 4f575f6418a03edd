/**
 * `tensorlane install`: the real download of a pinned wheel from PyPI (the CUDA runtime's, the
 * smallest), its sha256 checked, only the library and the licence unpacked; and the hostile cases on
 * wheels made here: a wrong hash, entries that would leave the target (zip slip, absolute path,
 * symlink), entries over the limits or lying about their size, a full disk, a refused connection.
 * Whatever fails leaves the install root as it was.
 */
import { execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import * as net from "node:net"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import type { RuntimeWheel } from "@tensorlane/core/native"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { installWheel, targetWheels, wheelFileName } from "../src/Install.ts"
import { WHEEL_LIMITS } from "../src/Wheel.ts"
import { tensorlane } from "./cli.ts"
import { makeWheel, pinWheel } from "./wheels.ts"

const ELF = Buffer.from([0x7f, 0x45, 0x4c, 0x46])

let scratch: string
let root: string
let from: string

beforeEach(() => {
  scratch = fs.mkdtempSync(join(os.tmpdir(), "tensorlane-install-"))
  root = join(scratch, "libraries")
  from = join(scratch, "wheels")
  fs.mkdirSync(from)
})

afterEach(() => {
  fs.rmSync(scratch, { recursive: true, force: true })
})

const rejection = async (promise: Promise<unknown>): Promise<Record<string, unknown>> => {
  try {
    await promise
  } catch (error) {
    return error as Record<string, unknown>
  }
  throw new Error("expected a rejection")
}

/** Every path under `dir`, relative to it. */
const tree = (dir: string): Array<string> => (fs.existsSync(dir) ? (fs.readdirSync(dir, { recursive: true }) as Array<string>).sort() : [])

const cudart = async (): Promise<RuntimeWheel> => {
  const wheel = (await targetWheels("nccl")).find((w) => w.name === "nvidia-cuda-runtime-cu12")
  if (wheel === undefined) throw new Error("@tensorlane/transport-nccl pins no CUDA runtime wheel")
  return wheel
}

describe("the real download", () => {
  it("fetches the pinned wheel from PyPI over https, checks it, unpacks only the library and the licence, once", async () => {
    const wheel = await cudart()
    expect(wheel.url).toMatch(/^https:\/\/files\.pythonhosted\.org\//)
    const done = await installWheel(wheel, { root })
    const folder = join(root, "nvidia_cuda_runtime_cu12-12.9.79")
    expect(done).toMatchObject({ folder, fresh: true, downloadedBytes: wheel.bytes, files: 2 })
    expect(tree(root)).toEqual([
      "nvidia_cuda_runtime_cu12-12.9.79",
      "nvidia_cuda_runtime_cu12-12.9.79/.tensorlane-wheel.json",
      "nvidia_cuda_runtime_cu12-12.9.79/nvidia",
      "nvidia_cuda_runtime_cu12-12.9.79/nvidia/cuda_runtime",
      "nvidia_cuda_runtime_cu12-12.9.79/nvidia/cuda_runtime/lib",
      "nvidia_cuda_runtime_cu12-12.9.79/nvidia/cuda_runtime/lib/libcudart.so.12",
      "nvidia_cuda_runtime_cu12-12.9.79/nvidia_cuda_runtime_cu12-12.9.79.dist-info",
      "nvidia_cuda_runtime_cu12-12.9.79/nvidia_cuda_runtime_cu12-12.9.79.dist-info/licenses",
      "nvidia_cuda_runtime_cu12-12.9.79/nvidia_cuda_runtime_cu12-12.9.79.dist-info/licenses/License.txt",
    ])
    const library = fs.readFileSync(join(folder, "nvidia/cuda_runtime/lib/libcudart.so.12"))
    expect(library.subarray(0, 4)).toEqual(ELF)
    expect(library.length).toBe(done.unpackedBytes - fs.statSync(join(folder, "nvidia_cuda_runtime_cu12-12.9.79.dist-info/licenses/License.txt")).size)
    expect(fs.readFileSync(join(folder, "nvidia_cuda_runtime_cu12-12.9.79.dist-info/licenses/License.txt"), "utf8")).toContain("End User License Agreement")
    expect(await installWheel(wheel, { root })).toMatchObject({ folder, fresh: false, downloadedBytes: 0 })
  })

  it("a download whose sha256 is not the pinned one is a WheelHashError, and nothing is unpacked", async () => {
    const wheel = { ...(await cudart()), sha256: "0".repeat(64) }
    expect(await rejection(installWheel(wheel, { root }))).toMatchObject({ _tag: "WheelHashError", url: wheel.url, expected: "0".repeat(64), actual: expect.stringMatching(/^25bba2df/) })
    expect(tree(root)).toEqual([])
  })

  it("a refused connection and a plain-http URL are DownloadErrors", async () => {
    const wheel = await cudart()
    const closed = net.createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const port = (closed.address() as net.AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    const refused = { ...wheel, url: `https://127.0.0.1:${port}/nvidia_cuda_runtime_cu12.whl` }
    expect(await rejection(installWheel(refused, { root }))).toMatchObject({ _tag: "DownloadError", url: refused.url, message: expect.stringContaining("ECONNREFUSED") })
    const plain = { ...wheel, url: wheel.url.replace("https:", "http:") }
    expect(await rejection(installWheel(plain, { root }))).toMatchObject({ _tag: "DownloadError", message: expect.stringContaining("is not an https URL") })
    expect(tree(root)).toEqual([])
  })

  it("a server that accepts the connection and then says nothing is a DownloadError after the idle limit", async () => {
    const sockets: Array<net.Socket> = []
    const silent = net.createServer((socket) => sockets.push(socket))
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    try {
      const wheel = { ...(await cudart()), url: `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}/silent.whl` }
      const started = Date.now()
      expect(await rejection(installWheel(wheel, { root, idleTimeoutMs: 300 }))).toMatchObject({ _tag: "DownloadError", message: expect.stringContaining("no data from") })
      expect(Date.now() - started).toBeLessThan(5_000)
      expect(tree(root)).toEqual([])
    } finally {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => silent.close(resolve))
    }
  })
})

/** Runs installWheel(wheel, { root }) in a child process that trusts `ca`; what it rejected with (tag and message), or "installed". */
const installTrusting = async (ca: string, wheel: RuntimeWheel): Promise<{ tag?: string; message?: string }> => {
  const install = fileURLToPath(new URL("../dist/Install.js", import.meta.url))
  const script = `
    const { installWheel } = await import(${JSON.stringify(install)})
    const wheel = { ...JSON.parse(process.env.WHEEL), libraries: [] }
    const outcome = await installWheel(wheel, { root: process.env.ROOT }).then(() => ({}), (e) => ({ tag: e._tag, message: e.message }))
    console.log(JSON.stringify(outcome))`
  const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, NODE_EXTRA_CA_CERTS: ca, WHEEL: JSON.stringify(wheel), ROOT: root },
    timeout: 30_000,
  })
  return JSON.parse(stdout) as { tag?: string; message?: string }
}

describe("a local https server", () => {
  it("a redirect to plain http is refused before it is followed", async () => {
    const key = join(scratch, "key.pem")
    const cert = join(scratch, "cert.pem")
    await promisify(execFile)("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
    const plainRequests: Array<string> = []
    const plain = http.createServer((request, response) => {
      plainRequests.push(request.url ?? "")
      response.end()
    })
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve))
    const target = `http://127.0.0.1:${(plain.address() as net.AddressInfo).port}/made.whl`
    const secure = https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (_request, response) => {
      response.writeHead(302, { location: target }).end()
    })
    await new Promise<void>((resolve) => secure.listen(0, "127.0.0.1", resolve))
    try {
      const wheel = { ...(await cudart()), url: `https://127.0.0.1:${(secure.address() as net.AddressInfo).port}/made.whl` }
      expect(await installTrusting(cert, wheel)).toEqual({ tag: "DownloadError", message: `${wheel.name} ${wheel.version}: ${wheel.url} redirects to ${target}, which is not https` })
      expect(plainRequests).toEqual([])
      expect(tree(root)).toEqual([])
    } finally {
      secure.close()
      plain.close()
    }
  })
})

describe("an install interrupted", () => {
  it("by a signal that ends the process leaves no temporary folder", async () => {
    const silent = net.createServer(() => {})
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    try {
      const wheel = { ...(await cudart()), libraries: [], url: `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}/silent.whl` }
      const install = fileURLToPath(new URL("../dist/Install.js", import.meta.url))
      const script = `
        const { installWheel } = await import(${JSON.stringify(install)})
        process.once("SIGTERM", () => process.exit(143))
        installWheel(JSON.parse(process.env.WHEEL), { root: process.env.ROOT })`
      const child = spawn(process.execPath, ["--input-type=module", "-e", script], { env: { ...process.env, WHEEL: JSON.stringify(wheel), ROOT: root }, stdio: "ignore" })
      const deadline = Date.now() + 10_000
      while (tree(root).length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
      expect(tree(root)).toEqual([expect.stringMatching(/^\.nvidia_cuda_runtime_cu12-12\.9\.79\.tmp-/)])
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGTERM")
      expect(await exited).toBe(143)
      expect(tree(root)).toEqual([])
    } finally {
      silent.close()
    }
  })
})

describe("wheels made here", () => {
  const library = Buffer.concat([ELF, Buffer.alloc(4096, 7)])
  const good = (extra: ReadonlyArray<Parameters<typeof makeWheel>[0][number]> = []) =>
    makeWheel([
      { name: "made/lib/libmade.so.1", data: library, mode: 0o100755 },
      { name: "made/include/made.h", data: Buffer.from("int made(void);\n") },
      { name: "made-1.0.dist-info/licenses/LICENSE", data: Buffer.from("the made licence\n") },
      { name: "made-1.0.dist-info/RECORD", data: Buffer.from("") },
      ...extra,
    ])
  const LIBRARIES = [/^made\/lib\/libmade\.so\.1$/]

  it("unpacks the libraries the pin names with their mode, and the licence; replaces a folder an interrupted install left", async () => {
    const wheel = pinWheel(from, "made", good(), LIBRARIES)
    fs.mkdirSync(join(root, "made-1.0", "made", "lib"), { recursive: true })
    fs.writeFileSync(join(root, "made-1.0", "made", "lib", "libmade.so.1"), "half")
    const done = await installWheel(wheel, { root, from })
    expect(done).toMatchObject({ fresh: true, files: 2, downloadedBytes: 0 })
    expect(tree(join(root, "made-1.0")).filter((p) => fs.statSync(join(root, "made-1.0", p)).isFile())).toEqual([
      ".tensorlane-wheel.json",
      "made-1.0.dist-info/licenses/LICENSE",
      "made/lib/libmade.so.1",
    ])
    expect(fs.readFileSync(join(root, "made-1.0", "made/lib/libmade.so.1"))).toEqual(library)
    expect(fs.statSync(join(root, "made-1.0", "made/lib/libmade.so.1")).mode & 0o777).toBe(0o755)
    expect(tree(root).filter((p) => p.startsWith("."))).toEqual([])
  })

  it("two installs of one wheel at once both succeed, and leave one complete folder", async () => {
    const wheel = pinWheel(from, "made", good(), LIBRARIES)
    const done = await Promise.all([installWheel(wheel, { root, from }), installWheel(wheel, { root, from })])
    expect(done.map((d) => d.fresh)).toEqual([true, true])
    expect(tree(root).filter((p) => !p.includes("/"))).toEqual(["made-1.0"])
    expect(fs.readFileSync(join(root, "made-1.0", "made/lib/libmade.so.1"))).toEqual(library)
    expect(await installWheel(wheel, { root, from })).toMatchObject({ fresh: false })
  })

  it("a file that is not the pinned one is a WheelHashError", async () => {
    const wheel = pinWheel(from, "made", good(), LIBRARIES)
    fs.writeFileSync(join(from, wheelFileName(wheel)), good([{ name: "made/lib/extra.so", data: library }]))
    expect(await rejection(installWheel(wheel, { root, from }))).toMatchObject({ _tag: "WheelHashError" })
    expect(tree(root)).toEqual([])
  })

  const hostile: ReadonlyArray<readonly [string, Parameters<typeof makeWheel>[0][number], RegExp]> = [
    ["a '..' entry (zip slip)", { name: "made/lib/../../../../evil.so", data: library }, /has a '\.\.', '\.' or empty path segment/],
    ["an absolute entry", { name: "/tmp/tensorlane-evil.so", data: library }, /has an absolute path/],
    ["a symlink entry", { name: "made/lib/libmade.so", data: Buffer.from("/etc/passwd"), mode: 0o120777 }, /is a symlink or another special file/],
    ["an entry over the size limit", { name: "made/lib/huge.so", data: Buffer.alloc(2 << 20) }, /has 2097152 bytes, more than the limit of 1048576/],
  ]
  for (const [what, entry, message] of hostile) {
    it(`${what} is an UnsafeWheelError before anything is written`, async () => {
      const wheel = pinWheel(from, "made", good([entry]), [...LIBRARIES, /^made\/lib\/(huge|libmade)\.so$/])
      const error = await rejection(installWheel(wheel, { root, from, limits: { ...WHEEL_LIMITS, entryBytes: 1 << 20 } }))
      expect(error).toMatchObject({ _tag: "UnsafeWheelError", wheel: "made 1.0", entry: entry.name, message: expect.stringMatching(message) })
      expect(tree(root)).toEqual([])
      expect(fs.existsSync("/tmp/tensorlane-evil.so")).toBe(false)
      expect(fs.existsSync(join(scratch, "evil.so"))).toBe(false)
    })
  }

  it("an entry that inflates past the size it declares is refused as it streams", async () => {
    const wheel = pinWheel(from, "made", makeWheel([{ name: "made/lib/libmade.so.1", data: Buffer.alloc(1 << 20), declaredBytes: 100 }]), LIBRARIES)
    expect(await rejection(installWheel(wheel, { root, from }))).toMatchObject({
      _tag: "UnsafeWheelError",
      entry: "made/lib/libmade.so.1",
      message: expect.stringContaining("inflates to more than its declared 100 bytes"),
    })
    expect(tree(root)).toEqual([])
  })

  it("more entries than the limit, or libraries adding up to more than the total limit, are refused", async () => {
    const many = pinWheel(from, "made", good(), LIBRARIES)
    expect(await rejection(installWheel(many, { root, from, limits: { ...WHEEL_LIMITS, entries: 3 } }))).toMatchObject({
      _tag: "UnsafeWheelError",
      message: expect.stringContaining("4 entries, more than the limit of 3"),
    })
    expect(await rejection(installWheel(many, { root, from, limits: { ...WHEEL_LIMITS, totalBytes: 1000 } }))).toMatchObject({
      _tag: "UnsafeWheelError",
      message: expect.stringContaining("more than the limit of 1000"),
    })
    expect(tree(root)).toEqual([])
  })

  it("a central directory larger than its entries need is refused before it is read", async () => {
    const wheel = pinWheel(from, "made", good([{ name: "made/lib/libmade.so", commentBytes: 60_000 }]), LIBRARIES)
    expect(await rejection(installWheel(wheel, { root, from }))).toMatchObject({ _tag: "UnsafeWheelError", message: expect.stringMatching(/a central directory of \d+ bytes for 5 entries/) })
    expect(tree(root)).toEqual([])
  })

  it("a wheel without the libraries its pin names is refused (its layout changed)", async () => {
    const wheel = pinWheel(from, "made", good(), [/^made\/lib\/libother\.so$/])
    expect(await rejection(installWheel(wheel, { root, from }))).toMatchObject({ _tag: "UnsafeWheelError", message: expect.stringContaining("no entry matches") })
    expect(tree(root)).toEqual([])
  })

  it("a full disk is a DiskFullError, and what was written is removed", async () => {
    const wheel = pinWheel(from, "made", makeWheel([{ name: "made/lib/libmade.so.1", data: Buffer.alloc(4 << 20) }]), LIBRARIES)
    const mount = join(scratch, "small")
    fs.mkdirSync(mount)
    const install = fileURLToPath(new URL("../dist/Install.js", import.meta.url))
    const script = `
      const { installWheel } = await import(${JSON.stringify(install)})
      const wheel = { ...JSON.parse(process.env.WHEEL), libraries: [/^made\\/lib\\/libmade\\.so\\.1$/] }
      const error = await installWheel(wheel, { root: process.argv[1], from: process.env.FROM }).then(() => undefined, (e) => e)
      const { readdirSync } = await import("node:fs")
      console.log(JSON.stringify({ tag: error?._tag, path: error?.path, left: readdirSync(process.argv[1]) }))`
    const { stdout } = await promisify(execFile)(
      "unshare",
      ["--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$1" --input-type=module -e "$2" "$0"', mount, process.execPath, script],
      { env: { ...process.env, WHEEL: JSON.stringify(wheel), FROM: from }, timeout: 30_000 },
    )
    expect(JSON.parse(stdout)).toEqual({ tag: "DiskFullError", path: mount, left: [] })
  })
})

describe("the command", () => {
  it("an unknown target is a usage error (exit 2); a wheel file that is not the pinned one fails with its tag (exit 1)", async () => {
    const unknown = await tensorlane(["install", "cuda"])
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/^UsageError: tensorlane install cuda: the targets are nixl, nccl, nvshmem/)
    // Names an object has from its prototype are no targets either.
    for (const target of ["constructor", "__proto__", "toString"]) {
      const inherited = await tensorlane(["install", target])
      expect(inherited.code, target).toBe(2)
      expect(inherited.stderr).toMatch(new RegExp(`^UsageError: tensorlane install ${target}: the targets are`))
    }
    const [nixl] = await targetWheels("nixl")
    fs.writeFileSync(join(from, wheelFileName(nixl!)), "not a wheel")
    const wrong = await tensorlane(["install", "nixl", "--into", root, "--from", from])
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toMatch(/^WheelHashError: nixl-cu12 1\.5\.1: the file has 11 bytes, the pin says 68631568/)
    expect(tree(root)).toEqual([])
  })
})
