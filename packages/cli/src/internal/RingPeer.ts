/** Forked twice by the message ring limit (Limits.ts): sends each message it receives straight back. */
process.on("message", (message) => process.send?.(message))
process.on("disconnect", () => process.exit(0))
