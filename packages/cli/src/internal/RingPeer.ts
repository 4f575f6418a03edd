/**
 * Forked twice by the message ring limit (Limits.ts): answers each message with one of its own, a
 * value of the bytes its first argument gives (the producer's result) or none (the consumer's).
 */
const reply = { value: new Uint8Array(Number(process.argv[2])) }
process.on("message", () => process.send?.(reply))
process.on("disconnect", () => process.exit(0))
