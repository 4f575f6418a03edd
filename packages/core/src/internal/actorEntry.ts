/**
 * What an actor process runs. The compile cache first, so that it covers every module loaded after
 * it; then the transfer agent's thread, which loads its modules while this thread loads actorMain.ts.
 */
import { startAgentThread } from "./agentThread.js"
import { enableCompileCache } from "./compileCache.js"

enableCompileCache()
startAgentThread()
await import("./actorMain.js")
