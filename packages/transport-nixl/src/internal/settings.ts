/**
 * How this process configures UCX and NIXL, from the environment. The defaults are the measured
 * choice recorded in README.md: UCX's default transports (cma for the bytes, tcp for wire-up) with
 * `ucx_error_handling_mode=peer`, which keeps dead-peer detection on at no measurable cost.
 *
 *   TENSORLANE_NIXL_ERROR_MODE       peer (default) | none
 *   TENSORLANE_NIXL_UCX_PARAMS       extra UCX backend parameters, "key=value,key=value"
 *   TENSORLANE_NIXL_PROGRESS_DELAY_US  poll timeout of NIXL's progress thread (default 100000; 0 spins)
 *   UCX_MODULES                      defaults to "^ib" (see below); UCX_TLS etc. pass through
 *   UCX_MEM_MMAP_HOOK_MODE           defaults to "reloc" (see below)
 *   UCX_LOG_FILE                     defaults to "stderr" (see below)
 *   UCX_NET_DEVICES                  defaults to "lo" (see below)
 */

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
export const DEFAULT_ENV: Readonly<Record<string, string>> = {
  UCX_MODULES: "^ib",
  UCX_MEM_MMAP_HOOK_MODE: "reloc",
  UCX_LOG_FILE: "stderr",
  UCX_NET_DEVICES: "lo",
}

// The main thread's process.env is the real environment: actor processes spawned from here
// inherit the default too. Worker threads only see a copy, which is why the addon sets the same
// defaults with setenv() right before it loads the library.
for (const [key, value] of Object.entries(DEFAULT_ENV)) process.env[key] ??= value

/**
 * NIXL 1.5.1's progress thread sleeps in poll() on UCX's event descriptors with this timeout, so
 * incoming work wakes it at once and the timeout only sets how often an idle process wakes; 0 makes
 * it spin (a whole core per process, measured 94%). Idle wake-ups slow transfers elsewhere on the
 * machine: at 10 ms (100 a second) a nixl 64 MiB call took about 0.7 ms longer here (README).
 */
const PROGRESS_DELAY_US = 100_000

export interface NixlSettings {
  readonly env: Readonly<Record<string, string>>
  readonly backendParams: ReadonlyArray<readonly [string, string]>
  readonly progressDelayUs: number
}

export const nixlSettings = (): NixlSettings => {
  const errorMode = process.env.TENSORLANE_NIXL_ERROR_MODE ?? "peer"
  if (errorMode !== "peer" && errorMode !== "none") {
    throw new TypeError(`TENSORLANE_NIXL_ERROR_MODE must be "peer" or "none", got "${errorMode}"`)
  }
  const extra = (process.env.TENSORLANE_NIXL_UCX_PARAMS ?? "")
    .split(",")
    .filter((pair) => pair.includes("="))
    .map((pair) => [pair.slice(0, pair.indexOf("=")).trim(), pair.slice(pair.indexOf("=") + 1).trim()] as const)
  const delay = Number(process.env.TENSORLANE_NIXL_PROGRESS_DELAY_US ?? PROGRESS_DELAY_US)
  return {
    env: DEFAULT_ENV,
    backendParams: [["ucx_error_handling_mode", errorMode], ...extra],
    progressDelayUs: Number.isSafeInteger(delay) && delay >= 0 ? delay : PROGRESS_DELAY_US,
  }
}
