/** `tensorlane doctor`, of this machine or (`--cluster`) of a cluster across hosts: its usage, its command line and its run. */
import { parseCommandLine, usageError } from "./Args.js"
import { formatDoctor, runDoctor } from "./Doctor.js"

export const DOCTOR_USAGE = `  tensorlane doctor [--json]
      every transport with its state, library versions and locations, the UCX transports NIXL sees
  tensorlane doctor --cluster <cluster.json> [--driver <name>] [--json]
      checks a cluster across hosts as that driver (default the config's first): Postgres (TLS under
      the cluster's CA, the cluster's role, no entry without TLS), every host's node (mutual TLS, its
      certificate's dates, what it reports: CPUs, memory, GPUs, transports); exits with 1 on a problem`

export interface DoctorCommand {
  /** The report as JSON rather than text. */
  readonly json: boolean
  /** The cluster config to check, and the driver to check it as. */
  readonly cluster?: string
  readonly driver?: string
}

/** The arguments after `doctor`; a UsageError for an unknown option or --driver without --cluster. */
export const parseDoctorArgs = (args: ReadonlyArray<string>, usage: string): DoctorCommand => {
  const { values } = parseCommandLine(args, { options: { json: { type: "boolean" }, cluster: { type: "string" }, driver: { type: "string" } } }, usage)
  if (values.cluster === undefined && values.driver !== undefined) throw usageError("--driver goes with --cluster", usage)
  return {
    json: values.json === true,
    ...(values.cluster !== undefined ? { cluster: values.cluster } : {}),
    ...(values.driver !== undefined ? { driver: values.driver } : {}),
  }
}

/** Prints the report; the exit code: 1 when a cluster has a problem, else 0. */
export const doctor = async (command: DoctorCommand): Promise<number> => {
  if (command.cluster !== undefined) {
    // Postgres' client loads only for a cluster.
    const { formatClusterDoctor, runClusterDoctor } = await import("./ClusterDoctor.js")
    const report = await runClusterDoctor(command.cluster, command.driver)
    console.log(command.json ? JSON.stringify(report, null, 2) : formatClusterDoctor(report))
    return report.ok ? 0 : 1
  }
  const report = await runDoctor()
  console.log(command.json ? JSON.stringify(report, null, 2) : formatDoctor(report))
  return 0
}
