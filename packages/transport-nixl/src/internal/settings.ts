/**
 * How this process configures UCX and NIXL, from the environment (core's settings reader;
 * docs/configuration.md lists every variable). The defaults are the measured choice recorded in
 * README.md: UCX's default transports (cma for the bytes, tcp for wire-up) with
 * `ucx_error_handling_mode=peer`, which keeps dead-peer detection on at no measurable cost. UCX's
 * own variables (UCX_TLS, ...) pass through; five of them get a default below.
 */
import { type Setting, choiceSetting, integerSetting, readSetting } from "@tensorlane/core/native"

/**
 * UCX's ib module loads both the wheel's bundled libibverbs/libnl and the system's (Debian's
 * rdma-core), and the two libnl copies crash the process in their exit handlers. Without
 * InfiniBand hardware the module is useless anyway; on a machine with it, set UCX_MODULES yourself.
 */
/*
 * UCX's default "bistro" hooks rewrite the first bytes of libc's mmap, munmap, madvise, brk... when
 * the agent starts, while V8's own threads may be executing them (a 64 MiB tensor has just been made);
 * "reloc" redirects the same calls through their relocation entries, pointer-sized writes that no
 * running thread can observe half done.
 */
/*
 * UCX writes its warnings to stdout unless told otherwise, into the output of the user's program (a
 * JSON report, say); diagnostics belong on stderr.
 */
/*
 * UCX's tcp transport listens on every network interface it may use, the machine's external ones
 * included, and accepts whoever connects. The actors of a cluster run on one host, so they need
 * loopback only; for peers on other hosts, name their interface(s) in UCX_NET_DEVICES (README).
 */
/*
 * Once NIXL's agent has started, UCX's dlopen hook also writes its own malloc and free into the
 * relocation entries of every library loaded afterwards, while the C library keeps its own: gloo's
 * addon, loaded into an actor that had used nixl, then freed a pointer with the other allocator in
 * its libnl's constructor (SIGABRT, "munmap_chunk(): invalid pointer"). Memory events (the mmap
 * hooks) stay on.
 */
export const DEFAULT_ENV: Readonly<Record<string, string>> = {
  UCX_MODULES: "^ib",
  UCX_MEM_MMAP_HOOK_MODE: "reloc",
  UCX_MEM_MALLOC_RELOC: "no",
  UCX_LOG_FILE: "stderr",
  UCX_NET_DEVICES: "lo",
}

// The main thread's process.env is the real environment: actor processes spawned from here
// inherit the default too. Worker threads only see a copy, which is why the addon sets the same
// defaults with setenv() right before it loads the library.
for (const [key, value] of Object.entries(DEFAULT_ENV)) process.env[key] ??= value

/** UCX's error handling for the backend: `peer` detects dead peers, `none` does not. */
const ERROR_MODE = choiceSetting("TENSORLANE_NIXL_ERROR_MODE", ["peer", "none"], "peer")

type Pair = readonly [string, string]

/** More UCX backend parameters. */
const UCX_PARAMS: Setting<ReadonlyArray<Pair>> = {
  variable: "TENSORLANE_NIXL_UCX_PARAMS",
  accepts: "key=value pairs separated by commas",
  fallback: [],
  parse: (raw) => {
    const pairs = raw.split(",").map((item): Pair | undefined => {
      const at = item.indexOf("=")
      return at > 0 && item.slice(0, at).trim() !== "" ? [item.slice(0, at).trim(), item.slice(at + 1).trim()] : undefined
    })
    return pairs.every((pair) => pair !== undefined) ? (pairs as ReadonlyArray<Pair>) : undefined
  },
}

/**
 * NIXL 1.5.1's progress thread sleeps in poll() on UCX's event descriptors with this timeout, so
 * incoming work wakes it at once and the timeout only sets how often an idle process wakes; 0 makes
 * it spin (a whole core per process, measured 94%). Idle wake-ups slow transfers elsewhere on the
 * machine: at 10 ms (100 a second) a nixl 64 MiB call took about 0.7 ms longer here (README).
 */
const PROGRESS_DELAY_US = integerSetting("TENSORLANE_NIXL_PROGRESS_DELAY_US", { min: 0, max: 60_000_000, fallback: 100_000, unit: "microseconds" })

/**
 * A READ from the same host is a copy inside its post (UCX's cma): the thread that asks for one of
 * up to this many bytes posts it itself and has it at once, where a thread of its own costs two
 * wake-ups (docs/decisions/nixl-read-here.md); beyond, or where the post does not complete at once
 * (another host), a native thread polls it. 0: every READ on a thread of its own, the caller's
 * event loop never blocked by a copy.
 */
const READ_HERE_BYTES = integerSetting("TENSORLANE_NIXL_READ_HERE_BYTES", { min: 0, max: Number.MAX_SAFE_INTEGER, fallback: 16 * 2 ** 20, unit: "bytes" })

export interface NixlSettings {
  readonly env: Readonly<Record<string, string>>
  readonly backendParams: ReadonlyArray<Pair>
  readonly progressDelayUs: number
  readonly readHereBytes: number
}

/** The settings now; InvalidSettingError for a value a variable does not accept. */
export const nixlSettings = (): NixlSettings => ({
  env: DEFAULT_ENV,
  backendParams: [["ucx_error_handling_mode", readSetting(ERROR_MODE)], ...readSetting(UCX_PARAMS)],
  progressDelayUs: readSetting(PROGRESS_DELAY_US),
  readHereBytes: readSetting(READ_HERE_BYTES),
})
