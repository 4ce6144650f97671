import { createRequire } from 'node:module';
import type { Builder } from 'junit-report-builder';
import type { ReplayReport } from './report.js';

// A CommonJS module whose module.exports is the builder (its types describe an ES default export).
const builder = createRequire(import.meta.url)('junit-report-builder') as Builder;

/**
 * `sim replay --junit FILE`: the replay as JUnit XML for CI (GitLab, Jenkins, GitHub's test reporters): a
 * testsuite per scenario and a testcase per step, failed with its message, skipped when it did not run. Times are
 * the cluster time each step took (virtual on an embedded run), so the file is as deterministic as the report.
 * A scenario that could not start (problems outside any step) gets one failed "set-up" testcase.
 */
export function junitReport(report: ReplayReport): string {
  const junit = builder.newBuilder().name('sim replay');
  for (const scenario of report.scenarios) {
    const suite = junit
      .testSuite()
      .name(scenario.name)
      .timestamp(new Date(Date.parse(scenario.start)))
      .time(scenario.durationMs / 1000)
      .property('file', scenario.file)
      .property('seed', String(scenario.seed))
      .property('mode', scenario.mode);
    if (scenario.problems.length > 0)
      suite.testCase().className(scenario.file).name('set-up').failure(scenario.problems.join('\n'), 'ScenarioProblem');
    for (const step of scenario.steps) {
      const testCase = suite.testCase().className(scenario.file).name(`step ${step.index}: ${step.name}`);
      if (step.start !== '' && step.end !== '') testCase.time((Date.parse(step.end) - Date.parse(step.start)) / 1000);
      if (step.interrupted) testCase.error(`interrupted: ${step.message ?? ''}`.trim(), 'Interrupted');
      else if (step.status === 'skipped') testCase.skipped();
      else if (step.status === 'failed') {
        const failed = step.expectations.filter((e) => !e.ok);
        const message =
          failed.length > 0
            ? failed.map((e) => `expected ${e.description}; found ${e.found}`).join('\n')
            : (step.message ?? 'failed');
        testCase.failure(message, failed.length > 0 ? 'ExpectationFailed' : 'StepFailed');
      }
      const output = [...step.notes, ...(step.kubectl ? [step.kubectl.stdout + step.kubectl.stderr] : [])].join('\n');
      if (output.trim() !== '') testCase.standardOutput(output);
    }
  }
  return junit.build();
}
