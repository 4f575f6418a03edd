/** `tensorlane cluster init`: its usage, its command line and its run. */
import { isIP } from "node:net"
import { count, list, parseCommandLine, usageError } from "./Args.js"
import type { ClusterInitOptions } from "./ClusterInit.js"
import { UsageError } from "./Errors.js"

export const CLUSTER_USAGE = `  tensorlane cluster init --hosts <name=address[@interface],...> --out <folder> [--drivers driver] [--name tensorlane]
                          [--port 7400] [--interface eth0] [--postgres <host[:port]>] [--database tensorlane]
                          [--user tensorlane] [--days 365]
      writes a cluster into a new folder: cluster.json, the cluster's CA (ca.key stays with you), a
      certificate and key per host (naming its name and address) and per driver, the Postgres
      server's certificate and password (postgres/); --postgres defaults to the first host's address`

/** `name=address[@interface]`: a host of `cluster init`. */
const hostSpec = (item: string, fallbackInterface: string) => {
  const match = /^([^=]+)=([^@]+)(?:@(.+))?$/.exec(item)
  if (match === null) throw new UsageError({ message: `--hosts ${item}: name=address[@interface] is needed, like h1=10.0.0.11@eth0` })
  return { name: match[1]!, address: match[2]!, interface: match[3] ?? fallbackInterface }
}

/** `host[:port]`, a bracketed IPv6 address for a host with a port. */
const endpoint = (text: string, fallbackPort: number) => {
  const match = /^(?:\[([^\]]+)\]|([^:]+))(?::(\d+))?$/.exec(text)
  if (match === null) {
    // A bare IPv6 address has colons of its own, so no port.
    if (isIP(text) === 6) return { host: text, port: fallbackPort }
    throw new UsageError({ message: `--postgres ${text}: host[:port] is needed, like 10.0.0.10:5432 or [fd00::10]:5432` })
  }
  return { host: match[1] ?? match[2]!, port: match[3] === undefined ? fallbackPort : count("postgres", match[3], 1) }
}

/** The arguments after `cluster`: `init` and its options; a UsageError for another subcommand, an unknown option or a malformed value. */
export const parseClusterArgs = (args: ReadonlyArray<string>, usage: string): ClusterInitOptions => {
  const [subcommand, ...rest] = args
  if (subcommand !== "init") throw usageError(`unknown cluster command "${subcommand ?? ""}"`, usage)
  const { values } = parseCommandLine(
    rest,
    {
      options: {
        hosts: { type: "string" },
        drivers: { type: "string", default: "driver" },
        out: { type: "string" },
        name: { type: "string", default: "tensorlane" },
        port: { type: "string", default: "7400" },
        interface: { type: "string", default: "eth0" },
        postgres: { type: "string" },
        database: { type: "string", default: "tensorlane" },
        user: { type: "string", default: "tensorlane" },
        days: { type: "string", default: "365" },
      },
    },
    usage,
  )
  if (values.hosts === undefined || values.out === undefined) throw usageError("cluster init needs --hosts and --out", usage)
  const hosts = (list(values.hosts) ?? []).map((item) => hostSpec(item, values.interface))
  return {
    out: values.out,
    name: values.name,
    hosts,
    drivers: list(values.drivers) ?? [],
    port: count("port", values.port, 1),
    postgres: { ...endpoint(values.postgres ?? hosts[0]?.address ?? "", 5432), database: values.database, user: values.user },
    days: count("days", values.days, 1),
  }
}

/** Writes the cluster and says where, with how many hosts and drivers, and until when its certificates are valid. */
export const clusterInit = async (options: ClusterInitOptions): Promise<void> => {
  // The certificates' library loads only for this command.
  const { initCluster } = await import("./ClusterInit.js")
  const config = await initCluster(options)
  console.log(`wrote cluster ${config.name} to ${config.file}: ${config.hosts.length} hosts, ${config.drivers.length} drivers, certificates valid until ${config.hosts[0]!.validTo.toISOString()}`)
}
