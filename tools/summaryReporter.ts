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
      for (const test of module.children.allTests()) {
        const state = test.result().state
        if (state === "passed") passed++
        else if (state === "failed") failed++
        else skipped++
      }
      // A file that failed to load has no tests to count but must still fail the run.
      if (module.state() === "failed" && [...module.children.allTests()].length === 0) failed++
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`)
  }
}
