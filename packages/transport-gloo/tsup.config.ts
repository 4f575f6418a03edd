import { packageBuild } from "../../tsup.base.ts"

export default packageBuild()
