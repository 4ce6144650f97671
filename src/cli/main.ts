import { buildProgram } from './program.js';

// A reader that goes away (`sim replay … | head`) is no failure: the rest of the output is dropped and the command
// finishes, with the exit code its work earned.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}

await buildProgram().parseAsync(process.argv);
