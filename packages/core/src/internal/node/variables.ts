/** The environment variables by which a host's node tells an actor process which cluster member it is. */
export const CLUSTER_CONFIG_VARIABLE = "TENSORLANE_CLUSTER_CONFIG"
export const CLUSTER_MEMBER_VARIABLE = "TENSORLANE_CLUSTER_MEMBER"
