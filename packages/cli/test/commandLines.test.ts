/**
 * Each command's parser (the arguments after its name): the options it returns, and the UsageError
 * of a command line it cannot run, with the usage it was given at the end where the whole usage helps.
 */
import { describe, expect, it } from "vitest"
import { parseBenchArgs } from "../src/BenchCommand.ts"
import { parseBuildArgs } from "../src/BuildCommand.ts"
import { parseClusterArgs } from "../src/ClusterCommand.ts"
import { parseDoctorArgs } from "../src/DoctorCommand.ts"
import { parseInstallArgs } from "../src/InstallCommand.ts"
import { parseNodeArgs } from "../src/NodeCommand.ts"

const USAGE = "usage: (test)"

/** The UsageError's message that `parse` throws. */
const refusal = (parse: () => unknown): string => {
  try {
    parse()
  } catch (error) {
    expect(error).toMatchObject({ _tag: "UsageError" })
    return (error as Error).message
  }
  throw new Error("parsed")
}

describe("node", () => {
  it("needs --config and --name", () => {
    expect(parseNodeArgs(["--config", "c.json", "--name", "h1"], USAGE)).toEqual({ config: "c.json", name: "h1" })
    expect(refusal(() => parseNodeArgs(["--config", "c.json"], USAGE))).toBe(`node needs --config and --name\n${USAGE}`)
    expect(refusal(() => parseNodeArgs(["--name", "h1", "--port", "1"], USAGE))).toMatch(/^Unknown option '--port'[\s\S]*\nusage: \(test\)$/)
  })
})

describe("doctor", () => {
  it("takes --json, and --driver only with --cluster", () => {
    expect(parseDoctorArgs([], USAGE)).toEqual({ json: false })
    expect(parseDoctorArgs(["--json", "--cluster", "c.json", "--driver", "d2"], USAGE)).toEqual({ json: true, cluster: "c.json", driver: "d2" })
    expect(refusal(() => parseDoctorArgs(["--driver", "d2"], USAGE))).toBe(`--driver goes with --cluster\n${USAGE}`)
  })
})

describe("build and install", () => {
  it("build takes one transport", () => {
    expect(parseBuildArgs(["gloo"], USAGE)).toBe("gloo")
    expect(refusal(() => parseBuildArgs([], USAGE))).toBe(`tensorlane build takes one transport\n${USAGE}`)
    expect(refusal(() => parseBuildArgs(["gloo", "nixl"], USAGE))).toBe(`tensorlane build takes one transport\n${USAGE}`)
  })
  it("install takes targets, --into and --from", () => {
    expect(parseInstallArgs(["nixl", "nccl", "--into", "/opt/libs"], USAGE)).toEqual({ targets: ["nixl", "nccl"], into: "/opt/libs" })
    expect(parseInstallArgs(["nvshmem", "--from", "/media/wheels"], USAGE)).toEqual({ targets: ["nvshmem"], from: "/media/wheels" })
    expect(refusal(() => parseInstallArgs(["--into", "/opt/libs"], USAGE))).toBe(`tensorlane install needs a target: nixl, nccl, nvshmem\n${USAGE}`)
  })
})

describe("cluster init", () => {
  it("reads hosts with their interfaces, drivers, and Postgres on the first host by default", () => {
    const { hosts, ...rest } = parseClusterArgs(["init", "--hosts", "a=10.0.0.1@eth1, b=10.0.0.2", "--out", "lab", "--interface", "ens5"], USAGE)
    expect(hosts.map((h) => `${h.name}=${h.address}@${h.interface}`)).toEqual(["a=10.0.0.1@eth1", "b=10.0.0.2@ens5"])
    const postgres = { host: "10.0.0.1", port: 5432, database: "tensorlane", user: "tensorlane" }
    expect(rest).toEqual({ out: "lab", name: "tensorlane", drivers: ["driver"], port: 7400, postgres, days: 365 })
  })
  it("reads --postgres as host[:port], an IPv6 address in brackets", () => {
    const postgres = (text: string) => parseClusterArgs(["init", "--hosts", "a=10.0.0.1", "--out", "lab", "--postgres", text], USAGE).postgres
    expect(postgres("db.lab")).toMatchObject({ host: "db.lab", port: 5432 })
    expect(postgres("db.lab:6432")).toMatchObject({ host: "db.lab", port: 6432 })
    expect(postgres("[fd00::5]:6432")).toMatchObject({ host: "fd00::5", port: 6432 })
    expect(postgres("fd00::5")).toMatchObject({ host: "fd00::5", port: 5432 })
    expect(refusal(() => postgres("db.lab:0"))).toBe("--postgres 0: a whole number >= 1 is needed")
    for (const text of ["10.0.0.1:abc", "db.lab:", "[fd00::5"]) {
      expect(refusal(() => postgres(text))).toBe(`--postgres ${text}: host[:port] is needed, like 10.0.0.10:5432 or [fd00::10]:5432`)
    }
  })
  it("refuses another subcommand, a missing --hosts or --out, a malformed host and counts below 1", () => {
    expect(refusal(() => parseClusterArgs(["create"], USAGE))).toBe(`unknown cluster command "create"\n${USAGE}`)
    expect(refusal(() => parseClusterArgs([], USAGE))).toBe(`unknown cluster command ""\n${USAGE}`)
    expect(refusal(() => parseClusterArgs(["init", "--hosts", "a=10.0.0.1"], USAGE))).toBe(`cluster init needs --hosts and --out\n${USAGE}`)
    expect(refusal(() => parseClusterArgs(["init", "--hosts", "a=10.0.0.1,b", "--out", "lab"], USAGE))).toMatch(/^--hosts b: name=address\[@interface\] is needed/)
    expect(refusal(() => parseClusterArgs(["init", "--hosts", "a=10.0.0.1", "--out", "lab", "--port", "0"], USAGE))).toBe("--port 0: a whole number >= 1 is needed")
    expect(refusal(() => parseClusterArgs(["init", "--hosts", "a=10.0.0.1", "--out", "lab", "--days", "1.5"], USAGE))).toBe("--days 1.5: a whole number >= 1 is needed")
  })
})

describe("bench", () => {
  it("has the defaults its usage names, and reads lists, counts and actor environments", () => {
    expect(parseBenchArgs([], USAGE)).toEqual({
      options: {
        transports: undefined,
        modules: [],
        sizes: [4096, 1 << 20, 64 << 20, 256 << 20],
        loops: ["released", "natural", "held"],
        repeats: 21,
        warmups: 2,
        minTimeMs: 1000,
        actorEnv: { producer: {}, consumer: {} },
      },
    })
    const args = ["--transports", "gloo, nixl", "--loops", "natural", "--repeats", "3", "--warmups", "0", "--warm-ms", "250", "--json", "r.json", "--svg", "r.svg"]
    const env = ["--producer-env", "A=1", "--producer-env", "B=x=y", "--consumer-env", "C="]
    const { options, json, svg } = parseBenchArgs([...args, ...env], USAGE)
    expect(options).toMatchObject({ transports: ["gloo", "nixl"], loops: ["natural"], repeats: 3, warmups: 0, warmMs: 250, actorEnv: { producer: { A: "1", B: "x=y" }, consumer: { C: "" } } })
    expect({ json, svg }).toEqual({ json: "r.json", svg: "r.svg" })
  })
  it("runs across two hosts with --hosts and --cluster together, --driver only with them", () => {
    expect(parseBenchArgs(["--hosts", "a,b", "--cluster", "c.json", "--driver", "d2"], USAGE).options.across).toEqual({ cluster: "c.json", producer: "a", consumer: "b", driver: "d2" })
    expect(refusal(() => parseBenchArgs(["--hosts", "a,b"], USAGE))).toBe(`--hosts and --cluster go together\n${USAGE}`)
    expect(refusal(() => parseBenchArgs(["--cluster", "c.json"], USAGE))).toBe(`--hosts and --cluster go together\n${USAGE}`)
    expect(refusal(() => parseBenchArgs(["--hosts", "a,b,c", "--cluster", "c.json"], USAGE))).toBe("--hosts a,b,c: two hosts are needed, producer,consumer")
    expect(refusal(() => parseBenchArgs(["--driver", "d2"], USAGE))).toBe(`--driver goes with --hosts and --cluster\n${USAGE}`)
  })
  it("refuses an empty --transports and a transport named twice", () => {
    for (const text of ["", ",", " , "]) {
      expect(refusal(() => parseBenchArgs(["--transports", text], USAGE))).toBe(`--transports ${text}: one or more transport names are needed, like object-store,gloo`)
    }
    expect(refusal(() => parseBenchArgs(["--transports", "gloo,nixl, gloo"], USAGE))).toBe("--transports gloo,nixl, gloo: gloo is named twice")
  })
})
