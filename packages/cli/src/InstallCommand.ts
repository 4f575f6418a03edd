/** `tensorlane install <target>...`: its usage, its command line and its run. */
import { libraryCacheDir } from "@tensorlane/core/native"
import { parseCommandLine, usageError } from "./Args.js"
import { INSTALL_TARGETS, installWheel, targetWheels } from "./Install.js"

export const INSTALL_USAGE = `  tensorlane install <nixl|nccl|nvshmem>... [--into <folder>] [--from <folder>]
      downloads the wheels of the target's run-time libraries that its package pins, from PyPI over
      https, checks their sha256 and unpacks the libraries and their licence files into
      <folder>/<wheel>-<version> (default: \${XDG_CACHE_HOME:-~/.cache}/tensorlane/libraries, where
      the loaders look); a wheel installed there already is not fetched again; --from: a folder
      holding the wheel files, used instead of downloading them (a machine offline)`

export interface InstallCommand {
  readonly targets: ReadonlyArray<string>
  /** The install root; undefined: the user cache's. */
  readonly into?: string
  /** A folder holding the wheel files, instead of downloading them. */
  readonly from?: string
}

/** The arguments after `install`; a UsageError for an unknown option or no target. */
export const parseInstallArgs = (args: ReadonlyArray<string>, usage: string): InstallCommand => {
  const { values, positionals } = parseCommandLine(args, { allowPositionals: true, options: { into: { type: "string" }, from: { type: "string" } } }, usage)
  if (positionals.length === 0) throw usageError(`tensorlane install needs a target: ${Object.keys(INSTALL_TARGETS).join(", ")}`, usage)
  return { targets: positionals, ...(values.into !== undefined ? { into: values.into } : {}), ...(values.from !== undefined ? { from: values.from } : {}) }
}

const megabytes = (bytes: number): string => `${(bytes / 1e6).toFixed(1)} MB`

/** Installs every wheel of each target in turn, a line per wheel. */
export const install = async (command: InstallCommand): Promise<void> => {
  const root = command.into ?? libraryCacheDir()
  // Exiting runs the installer's exit hook, which removes its temporary folders; a signal's default would not.
  process.once("SIGINT", () => process.exit(130))
  process.once("SIGTERM", () => process.exit(143))
  for (const target of command.targets) {
    for (const wheel of await targetWheels(target)) {
      const done = await installWheel(wheel, { root, ...(command.from !== undefined ? { from: command.from } : {}) })
      const fetched = command.from !== undefined ? `copied from ${command.from}` : `downloaded ${megabytes(done.downloadedBytes)}`
      console.log(done.fresh ? `${done.wheel}: ${fetched}, unpacked ${done.files} files (${megabytes(done.unpackedBytes)}) into ${done.folder}` : `${done.wheel}: already in ${done.folder}`)
    }
  }
}
