// What `tensorlane doctor` reads: each package's status function, which throws a NativeLibraryError
// naming what is missing, where it looked and the fix.
import { NativeLibraryError } from "@tensorlane/core"
import { glooStatus } from "@tensorlane/transport-gloo"
import { nixlStatus } from "@tensorlane/transport-nixl"

try {
  const gloo = glooStatus()
  console.log(`gloo ${gloo.glooVersion} from ${gloo.library}`)
  console.log(`nixl from ${nixlStatus().library}`)
} catch (error) {
  if (!(error instanceof NativeLibraryError)) throw error
  console.log(`${error.library} missing; tried ${error.tried.join(", ")}; fix: ${error.fix}`)
}
