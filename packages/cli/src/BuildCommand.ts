/** `tensorlane build <transport>`: its usage, its command line and its run. */
import { join } from "node:path"
import { parseCommandLine, usageError } from "./Args.js"
import { runBuild } from "./Build.js"

export const BUILD_USAGE = `  tensorlane build <gloo|nixl|nccl|symmetric-mem|package name>
      builds the transport's addon from the sources its package ships, into the per-user cache
      (\$XDG_CACHE_HOME/tensorlane, else ~/.cache/tensorlane), for a machine that no prebuilt platform
      package covers; needs cmake, a C++ compiler and the transport's system libraries (gloo: libgloo-dev)`

/** The arguments after `build`: the one transport to build; a UsageError otherwise. */
export const parseBuildArgs = (args: ReadonlyArray<string>, usage: string): string => {
  const { positionals } = parseCommandLine(args, { options: {}, allowPositionals: true }, usage)
  if (positionals.length !== 1) throw usageError("tensorlane build takes one transport", usage)
  return positionals[0]!
}

/** Builds the transport's addon for the package that resolves from the working directory, and names its files. */
export const build = async (transport: string): Promise<void> => {
  const built = await runBuild(transport, process.cwd())
  console.log(`built ${built.packageName}@${built.version}: ${built.files.map((f) => join(built.dir, f)).join(", ")}`)
}
