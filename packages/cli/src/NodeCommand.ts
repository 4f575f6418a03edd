/** `tensorlane node`: its usage, its command line, and the node that runs until SIGTERM or SIGINT. */
import { type NodeOptions, startNode } from "@tensorlane/core"
import { parseCommandLine, usageError } from "./Args.js"

export const NODE_USAGE = `  tensorlane node --config <cluster.json> --name <host>
      runs the node of a host of a cluster across hosts: listens on the host's address under mutual
      TLS and starts the actors that drivers place on the host; SIGTERM or SIGINT ends it and them`

/** The arguments after `node`; a UsageError for an unknown option or without --config and --name. */
export const parseNodeArgs = (args: ReadonlyArray<string>, usage: string): NodeOptions => {
  const { values } = parseCommandLine(args, { options: { config: { type: "string" }, name: { type: "string" } } }, usage)
  if (values.config === undefined || values.name === undefined) throw usageError("node needs --config and --name", usage)
  return { config: values.config, name: values.name }
}

/** Runs the host's node until SIGTERM or SIGINT, then closes it (and its actors). */
export const node = async (options: NodeOptions): Promise<void> => {
  const running = await startNode(options)
  console.log(`tensorlane node ${running.host.name} listening on ${running.host.address}:${running.host.port}`)
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once("SIGTERM", () => resolve("SIGTERM"))
    process.once("SIGINT", () => resolve("SIGINT"))
  })
  await running.close()
  console.log(`tensorlane node ${running.host.name} ended (${signal})`)
}
