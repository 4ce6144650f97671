import { writeFileSync } from 'node:fs';
import type { Connection } from '../client/kubeconfig.js';
import { htmlReport } from '../scenario/html.js';
import { junitReport } from '../scenario/junit.js';
import { loadScenario, ScenarioError, type LoadedScenario } from '../scenario/loader.js';
import {
  ChangeSummaries,
  progressHeader,
  replayReport,
  scenarioReport,
  stepReport,
  timelineFooter,
  timelineStep,
  type ScenarioReport,
} from '../scenario/report.js';
import { runScenario, type RunHooks, type StepResult } from '../scenario/runner.js';
import { scenarioSchema } from '../scenario/schema.js';
import { offset } from '../scenario/conditions.js';
import { Logger, type LogLevel } from './logger.js';
import { findServer } from './remote.js';
import { UI_PATH } from '../server/ui.js';

export interface ReplayOptions {
  server?: string;
  kubeconfig?: string;
  token?: string;
  certificateAuthority?: string;
  insecureSkipTlsVerify?: boolean;
  seed?: number;
  /** --speed: the same as --pace. */
  speed?: number;
  report?: string;
  html?: string;
  junit?: string;
  changes: boolean;
  printSchema?: boolean;
  logLevel: LogLevel;
  /** Serve the live view of the replay's cluster, and keep it up after the last step until Ctrl-C. */
  ui?: boolean;
  port?: number;
  pace?: number;
}

/** With --ui, cluster time runs at most this many times as fast as the wall's, unless --pace says otherwise. */
const UI_PACE = 10;

/** Resolves when the signal fires (at once if it has). */
function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/** Resolves when the user presses Enter on a terminal; never without one. */
function enterPressed(): { pressed: Promise<void>; stop: () => void } {
  if (!process.stdin.isTTY) return { pressed: new Promise(() => undefined), stop: () => undefined };
  let listener: (() => void) | undefined;
  const pressed = new Promise<void>((resolve) => {
    listener = () => resolve();
    process.stdin.once('data', listener);
  });
  return {
    pressed,
    stop: () => {
      process.stdin.off('data', listener!);
      process.stdin.pause();
    },
  };
}

/**
 * --ui: prints where the live view of the replay's cluster is, and before the first scenario's first step waits
 * until a browser has opened it (or Enter is pressed), so that the person watching sees every step. Later
 * scenarios are served on the same port, so the open page follows them.
 */
class LiveView {
  port: number;
  private waited = false;

  constructor(
    port: number,
    private readonly signal: AbortSignal,
  ) {
    this.port = port;
  }

  serving = async (url: string, pageOpened: Promise<void> | undefined): Promise<void> => {
    this.port = Number(new URL(url).port) || this.port;
    const page = `${url.replace(/\/$/, '')}${UI_PATH}`;
    if (!pageOpened || this.waited) {
      process.stderr.write(`live view: ${page}\n`);
      return;
    }
    this.waited = true;
    const tty = process.stdin.isTTY === true;
    process.stderr.write(
      `live view of the replay's cluster: ${page}\nthe replay starts when it is open${tty ? ' (or press Enter)' : ''}\n`,
    );
    const enter = enterPressed();
    await Promise.race([pageOpened, enter.pressed, aborted(this.signal)]);
    enter.stop();
  };
}

/**
 * The server to drive: --server or --kubeconfig only. The default kubeconfig is never read: a replay creates and
 * deletes objects, and $KUBECONFIG or ~/.kube/config may point at whatever cluster the user last used.
 */
function connectionOf(options: ReplayOptions): Connection | undefined {
  return findServer(options, false)?.connection;
}

/** The exit code of a run stopped by SIGINT or SIGTERM, as a shell reports a Ctrl-C. */
const INTERRUPTED_EXIT = 130;

/**
 * Prints each step as it finishes, and on a terminal a progress line (on stderr, rewritten in place) while a long
 * advance runs. The text is what the whole report prints (report.ts), a step at a time.
 */
class TimelineStream implements RunHooks {
  private changes: ChangeSummaries | undefined;
  private progressShown = false;

  constructor(
    private readonly options: ReplayOptions,
    private readonly tty: boolean,
  ) {}

  started: RunHooks['started'] = (run) => {
    this.changes = new ChangeSummaries(run);
    process.stdout.write(progressHeader(run));
  };

  stepDone: RunHooks['stepDone'] = (step, run) => {
    this.clearProgress();
    process.stdout.write(
      timelineStep(stepReport(step, this.changes!.of(step.index), run.startTime), { changes: this.options.changes }),
    );
  };

  advancing: RunHooks['advancing'] = (step: StepResult, doneMs: number, totalMs: number) => {
    if (!this.tty) return;
    const percent = Math.floor((doneMs / totalMs) * 100);
    process.stderr.write(
      `\r\x1b[K  step ${step.index} ${step.title}: ${offset(doneMs, 0).slice(2)} of ${offset(totalMs, 0).slice(2)} (${percent}%)`,
    );
    this.progressShown = true;
  };

  clearProgress(): void {
    if (!this.progressShown) return;
    process.stderr.write('\r\x1b[K');
    this.progressShown = false;
  }
}

/**
 * `sim replay FILE…`: runs each scenario (on a fresh embedded cluster, or against --server), streaming its
 * timeline step by step, then a summary, and writes the reports. Exit code 0 when everything passed, 1 when an
 * expectation or step failed, 2 when a scenario file is invalid, 130 when interrupted (SIGINT, SIGTERM): the
 * reports then hold what ran until then.
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
  if ((options.port !== undefined || options.pace !== undefined || options.speed !== undefined) && remote) {
    process.stderr.write('sim replay: --port and --pace are for the embedded cluster, not a --server\n');
    process.exitCode = 2;
    return;
  }
  if (options.port !== undefined && !options.ui) {
    process.stderr.write('sim replay: --port is where --ui serves the live view: give --ui too\n');
    process.exitCode = 2;
    return;
  }
  if (remote && loaded.length > 1)
    log.warn(
      `${loaded.length} scenarios run one after another against ${remote.server}: each sees what the ones before it left`,
    );

  // The first SIGINT/SIGTERM stops the run at its next piece of work and writes the reports; a second one exits.
  const abort = new AbortController();
  const onSignal = (): void => {
    if (abort.signal.aborted) process.exit(INTERRUPTED_EXIT);
    abort.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const reports: ScenarioReport[] = [];
  let couldNotRun = 0;
  const view = options.ui ? new LiveView(options.port ?? 0, abort.signal) : undefined;
  const pace = options.pace ?? options.speed ?? (options.ui ? UI_PACE : 0);
  /** With --ui: the last scenario's cluster, left running for the page. */
  let kept: (() => Promise<void>) | undefined;
  try {
    for (const [i, scenario] of loaded.entries()) {
      if (abort.signal.aborted) break;
      if (
        remote &&
        (scenario.scenario.seed !== undefined ||
          scenario.scenario.nodes !== undefined ||
          scenario.scenario.controllers !== undefined)
      ) {
        log.info(`${scenario.file}: seed, nodes and controllers are the server's own with --server`);
      }
      const stream = new TimelineStream(options, process.stderr.isTTY === true);
      let report: ScenarioReport;
      try {
        const run = await runScenario(scenario, {
          server: remote,
          seed: options.seed,
          log: (level, message) => log.log(level, message),
          signal: abort.signal,
          hooks: view ? Object.assign(stream, { serving: view.serving }) : stream,
          ...(view ? { serve: { port: view.port }, keepOpen: !remote && i === loaded.length - 1 } : {}),
          pace,
        });
        kept = run.close;
        stream.clearProgress();
        report = scenarioReport(run);
      } catch (err) {
        stream.clearProgress();
        process.stderr.write(`${scenario.file}: cannot run: ${err instanceof Error ? err.message : String(err)}\n`);
        couldNotRun++;
        continue;
      }
      reports.push(report);
      // Steps that never ran (after a failure, or an interrupt) and a run that could not start print here.
      const printed = report.steps.filter((s) => s.status !== 'skipped' || s.interrupted).length;
      if (printed === 0 && report.problems.length > 0)
        process.stdout.write(`${report.name}  (${report.file}, seed ${report.seed}, ${report.mode})\n`);
      for (const s of report.steps) if (s.status === 'skipped') process.stdout.write(timelineStep(s, options));
      process.stdout.write(timelineFooter(report));
      if (loaded.length > 1) process.stdout.write('\n');
      if (report.interruptedAt !== undefined)
        process.stderr.write(`sim replay: interrupted at step ${report.interruptedAt} of ${scenario.file}\n`);
    }
  } catch (err) {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    throw err;
  }
  const full = replayReport(reports);
  if (options.report) writeFileSync(options.report, `${JSON.stringify(full, null, 2)}\n`);
  if (options.html) writeFileSync(options.html, htmlReport(full));
  if (options.junit) writeFileSync(options.junit, junitReport(full));
  if (loaded.length > 1) {
    const passed = reports.filter((r) => r.result === 'passed').length;
    const notRun = loaded.length - reports.length - couldNotRun;
    process.stdout.write(
      `${loaded.length} scenarios: ${passed} passed, ${reports.length - passed + couldNotRun} failed${notRun > 0 ? `, ${notRun} not run` : ''}\n`,
    );
  }
  if (abort.signal.aborted) process.exitCode = INTERRUPTED_EXIT;
  else if (full.result === 'failed' || reports.length < loaded.length) process.exitCode = 1;
  if (kept) {
    if (!abort.signal.aborted)
      process.stderr.write(
        `replay finished: the live view stays up on the cluster as the replay left it (its clock paused; the page can step it) until Ctrl-C\n`,
      );
    await aborted(abort.signal);
    await kept();
  }
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}
