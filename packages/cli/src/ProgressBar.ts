/** A one-line progress bar on stderr, drawn only when stderr is a terminal (so logs and pipes stay clean). */
import type { Progress } from "./Bench.js"

const WIDTH = 30

export interface ProgressBar {
  readonly update: Progress
  /** Erases the bar. */
  readonly done: () => void
}

export const progressBar = (stream: NodeJS.WriteStream = process.stderr): ProgressBar => {
  if (!stream.isTTY) return { update: () => {}, done: () => {} }
  let drawn = 0
  return {
    update: (done, total, label) => {
      const filled = Math.round((done / total) * WIDTH)
      const line = `[${"#".repeat(filled)}${".".repeat(WIDTH - filled)}] ${Math.floor((done / total) * 100)}% ${label}`
      stream.write(`\r${line.padEnd(drawn)}`)
      drawn = line.length
    },
    done: () => {
      if (drawn > 0) stream.write(`\r${" ".repeat(drawn)}\r`)
    },
  }
}
