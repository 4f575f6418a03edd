#!/usr/bin/env node
/**
 * The tensorlane command: `doctor`, `bench`, `build`, `install`, `cluster init` and `node` (USAGE
 * says what each does; each command's module reads its arguments and runs it). Errors of the
 * command line and of a build print `<_tag>: <message>` and exit with 2; other typed errors print
 * the same and exit with 1, and an unexpected error its stack.
 */
import { CertificateError, ClusterConfigError } from "@tensorlane/core"
import { usageError } from "./Args.js"
import { BENCH_HOSTS_USAGE, BENCH_USAGE, bench, parseBenchArgs } from "./BenchCommand.js"
import { BUILD_USAGE, build, parseBuildArgs } from "./BuildCommand.js"
import { CLUSTER_USAGE, clusterInit, parseClusterArgs } from "./ClusterCommand.js"
import { DOCTOR_USAGE, doctor, parseDoctorArgs } from "./DoctorCommand.js"
import { BenchTransportError, BuildError, DiskFullError, DownloadError, PackageMissingError, UnsafeWheelError, UsageError, WheelHashError } from "./Errors.js"
import { INSTALL_USAGE, install, parseInstallArgs } from "./InstallCommand.js"
import { NODE_USAGE, node, parseNodeArgs } from "./NodeCommand.js"

const USAGE = ["usage:", CLUSTER_USAGE, NODE_USAGE, DOCTOR_USAGE, BENCH_USAGE, BUILD_USAGE, INSTALL_USAGE, BENCH_HOSTS_USAGE].join("\n")

/** Runs the command; its exit code (0 unless it says otherwise). */
const main = async (argv: ReadonlyArray<string>): Promise<number | void> => {
  const [command, ...rest] = argv
  if (command === "doctor") return doctor(parseDoctorArgs(rest, USAGE))
  if (command === "bench") return bench(parseBenchArgs(rest, USAGE))
  if (command === "build") return build(parseBuildArgs(rest, USAGE))
  if (command === "install") return install(parseInstallArgs(rest, USAGE))
  if (command === "cluster") return clusterInit(parseClusterArgs(rest, USAGE))
  if (command === "node") return node(parseNodeArgs(rest, USAGE))
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    console.log(USAGE)
    return
  }
  throw usageError(`unknown command "${command}"`, USAGE)
}

main(process.argv.slice(2)).then(
  // Actor processes and native threads are gone once the cluster shut down; exit without waiting for stray handles.
  (code) => process.exit(code ?? 0),
  (error: unknown) => {
    if (error instanceof UsageError || error instanceof BenchTransportError || error instanceof BuildError) {
      console.error(`${error._tag}: ${error.message}`)
      process.exit(2)
    }
    // An install that failed, a config or certificate that is not right: what and where is all there is to say.
    if ([DownloadError, WheelHashError, UnsafeWheelError, DiskFullError, PackageMissingError, ClusterConfigError, CertificateError].some((type) => error instanceof type)) {
      console.error(`${(error as { _tag: string })._tag}: ${(error as Error).message}`)
      process.exit(1)
    }
    // A typed error says what went wrong in its message; only an unexpected one needs its stack.
    if (typeof error === "object" && error !== null && "_tag" in error && error instanceof Error) console.error(`${String(error._tag)}: ${error.message}`)
    else console.error(error instanceof Error ? (error.stack ?? error.message) : String(error))
    process.exit(1)
  },
)
