/** What a transfer agent's worker thread runs: the compile cache first (each thread has its own), then agentMain.ts. */
import { enableCompileCache } from "./compileCache.js"

enableCompileCache()
await import("./agentMain.js")
