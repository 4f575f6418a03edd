/** The UCX debug log reader, on lines as UCX 1.23 (bundled with the nixl-cu12 1.5.1 wheel) writes them. */
import { describe, expect, it } from "vitest"
import { parseUcxLog } from "../src/UcxReport.ts"

const prefix = "[1795314010.701055] [vm:14765:0]   "
const LOG = [
  "[1795314010.699815] [vm:14765:0]          module.c:265  UCX  DEBUG dlopen('/opt/nixl_cu12.libs/ucx/libuct_cuda.so.0.0.0', mode=0x1) failed: libcuda.so.1: cannot open shared object file: No such file or directory",
  "[1795313977.104242] [vm:13888:0]     ucp_context.c:2753 UCX  INFO  Version 1.23.0 (loaded from /opt/nixl/.libs/./plugins/../../nixl_cu12.libs/libucp-b39b3ed9.so.0.0.0, git branch <unknown>, revision 65e342a)",
  `${prefix}+------------+-----------+-----------+------------------------------------------------------------+`,
  `${prefix}| Available Transports and Devices (ctx: tensorlane-vm-14765-cc351a69953)                         |`,
  `${prefix}+------------+-----------+-----------+------------------------------------------------------------+`,
  `${prefix}| Type       | Component | Transport | Device (System device)                                     |`,
  `${prefix}+------------+-----------+-----------+------------------------------------------------------------+`,
  `${prefix}| network    | tcp       | + tcp     | + eth0  + lo  - eth1                                       |`,
  `${prefix}+------------+-----------+-----------+------------------------------------------------------------+`,
  `${prefix}| intra-node | sysv      | + sysv    | + memory                                                   |`,
  `${prefix}|            +-----------+-----------+------------------------------------------------------------+`,
  `${prefix}|            | cma       | - cma     | + memory                                                   |`,
  `${prefix}+------------+-----------+-----------+------------------------------------------------------------+`,
  `${prefix}| loopback   | self      | + self    | + memory                                                   |`,
  `${prefix}+------------+-----------+-----------+------------------------------------------------------------+`,
  `${prefix}| Legend: + = enabled, - = disabled                                                               |`,
  `${prefix}| All of the available transports are listed, some may be disabled or unsupported on your system. |`,
].join("\n")

describe("parseUcxLog", () => {
  it("reads the version, the library (normalised), the transports table and the modules that did not load", () => {
    const report = parseUcxLog(LOG)
    expect(report.version).toBe("1.23.0")
    expect(report.library).toBe("/opt/nixl/nixl_cu12.libs/libucp-b39b3ed9.so.0.0.0")
    expect(report.transports).toEqual([
      { component: "tcp", transport: "tcp", enabled: true, devices: ["eth0", "lo"] },
      { component: "sysv", transport: "sysv", enabled: true, devices: ["memory"] },
      { component: "cma", transport: "cma", enabled: false, devices: ["memory"] },
      { component: "self", transport: "self", enabled: true, devices: ["memory"] },
    ])
    expect(report.unloadedModules).toEqual([
      { module: "libuct_cuda.so.0.0.0", reason: "libcuda.so.1: cannot open shared object file: No such file or directory" },
    ])
  })

  it("reports nothing it did not see", () => {
    expect(parseUcxLog("unrelated output\n")).toEqual({ version: undefined, library: undefined, transports: [], unloadedModules: [] })
  })
})
