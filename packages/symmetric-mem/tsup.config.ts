import { packageBuild } from "../../tsup.base.ts"

// transport-nccl is an optional peer, imported only by the nccl-window backend.
export default packageBuild({ external: ["@tensorlane/core", "@tensorlane/transport-nccl"] })
