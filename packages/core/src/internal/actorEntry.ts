/** What an actor process runs: the compile cache first, so that it covers every module actorMain.ts loads. */
import { enableCompileCache } from "./compileCache.js"

enableCompileCache()
await import("./actorMain.js")
