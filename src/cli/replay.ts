import { writeFileSync } from 'node:fs';
import type { Connection } from '../client/kubeconfig.js';
import { htmlReport } from '../scenario/html.js';
import { loadScenario, ScenarioError, type LoadedScenario } from '../scenario/loader.js';
import { replayReport, scenarioReport, textTimeline, type ScenarioReport } from '../scenario/report.js';
import { runScenario } from '../scenario/runner.js';
import { scenarioSchema } from '../scenario/schema.js';
import { Logger, type LogLevel } from './logger.js';
import { findServer } from './remote.js';

export interface ReplayOptions {
  server?: string;
  kubeconfig?: string;
  token?: string;
  certificateAuthority?: string;
  insecureSkipTlsVerify?: boolean;
  seed?: number;
  report?: string;
  html?: string;
  changes: boolean;
  printSchema?: boolean;
  logLevel: LogLevel;
}

/**
 * The server to drive: --server or --kubeconfig only. The default kubeconfig is never read: a replay creates and
 * deletes objects, and $KUBECONFIG or ~/.kube/config may point at whatever cluster the user last used.
 */
function connectionOf(options: ReplayOptions): Connection | undefined {
  return findServer(options, false)?.connection;
}

/**
 * `sim replay FILE…`: runs each scenario (on a fresh embedded cluster, or against --server), prints its
 * timeline and a summary, writes the reports. Exit code 0 when everything passed, 1 when an expectation or
 * step failed, 2 when a scenario file is invalid.
 */
export async function replay(files: string[], options: ReplayOptions): Promise<void> {
  if (options.printSchema) {
    process.stdout.write(`${JSON.stringify(scenarioSchema, null, 2)}\n`);
    return;
  }
  if (files.length === 0) {
    process.stderr.write('sim replay: give one or more scenario files\n');
    process.exitCode = 2;
    return;
  }
  const log = new Logger(options.logLevel);
  let remote: Connection | undefined;
  try {
    remote = connectionOf(options);
  } catch (err) {
    process.stderr.write(`sim replay: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 2;
    return;
  }
  const loaded: LoadedScenario[] = [];
  for (const file of files) {
    try {
      loaded.push(loadScenario(file));
    } catch (err) {
      if (!(err instanceof ScenarioError)) throw err;
      process.stderr.write(`${err.message}\n`);
      process.exitCode = 2;
    }
  }
  if (process.exitCode === 2) return;
  if (remote && loaded.length > 1)
    log.warn(
      `${loaded.length} scenarios run one after another against ${remote.server}: each sees what the ones before it left`,
    );
  const reports: ScenarioReport[] = [];
  for (const scenario of loaded) {
    if (
      remote &&
      (scenario.scenario.seed !== undefined ||
        scenario.scenario.nodes !== undefined ||
        scenario.scenario.controllers !== undefined)
    ) {
      log.info(`${scenario.file}: seed, nodes and controllers are the server's own with --server`);
    }
    let report: ScenarioReport;
    try {
      const run = await runScenario(scenario, {
        server: remote,
        seed: options.seed,
        log: (level, message) => log.log(level, message),
      });
      report = scenarioReport(run);
    } catch (err) {
      process.stderr.write(`${scenario.file}: cannot run: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
      continue;
    }
    reports.push(report);
    process.stdout.write(textTimeline(report, { changes: options.changes }));
    if (loaded.length > 1) process.stdout.write('\n');
  }
  const full = replayReport(reports);
  if (options.report) writeFileSync(options.report, `${JSON.stringify(full, null, 2)}\n`);
  if (options.html) writeFileSync(options.html, htmlReport(full));
  if (loaded.length > 1) {
    const passed = reports.filter((r) => r.result === 'passed').length;
    process.stdout.write(`${loaded.length} scenarios: ${passed} passed, ${loaded.length - passed} failed\n`);
  }
  if (full.result === 'failed' || reports.length < loaded.length) process.exitCode = 1;
}
