export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
const order: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

/** Plain lines on stderr, filtered by level (stdout is kept for what scripts read: the URL). */
export class Logger {
  constructor(private readonly level: LogLevel) {}

  log(level: LogLevel, message: string): void {
    if (order[level] <= order[this.level]) process.stderr.write(`${level.toUpperCase().padEnd(5)} ${message}\n`);
  }

  error = (m: string): void => this.log('error', m);
  warn = (m: string): void => this.log('warn', m);
  info = (m: string): void => this.log('info', m);
  debug = (m: string): void => this.log('debug', m);
}
