// What `tensorlane doctor` reads: each transport's status function, which names what is missing.
import { NativeLibraryError } from "@tensorlane/core"
import { glooStatus } from "@tensorlane/transport-gloo"
import { nixlStatus } from "@tensorlane/transport-nixl"

const gloo = glooStatus()
console.log(gloo.ready ? `gloo ${gloo.glooVersion} from ${gloo.library}` : `gloo not ready: ${gloo.error}`)
try {
  console.log(`nixl from ${nixlStatus().library}`)
} catch (error) {
  if (!(error instanceof NativeLibraryError)) throw error
  console.log(`${error.library} missing; tried ${error.tried.join(", ")}; fix: ${error.fix}`)
}
