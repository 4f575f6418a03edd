/**
 * Prints the plain closing line CI reads ("N passed, N failed, N skipped"), after vitest's own report.
 */
import type { Reporter, TestModule } from "vitest/node"

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0
    let failed = 0
    let skipped = 0
    for (const module of testModules) {
      let failedHere = 0
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failedHere++
        else skipped++
      }
      // A file whose own code failed (it did not load, or a hook threw and its tests were skipped)
      // fails the run even when none of its tests did.
      if (module.state() === "failed" && failedHere === 0) failedHere = 1
      failed += failedHere
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`)
  }
}
