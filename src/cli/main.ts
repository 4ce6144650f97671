import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { serve } from './serve.js';
import { kubeconfigYaml } from '../client/kubeconfig.js';

function integer(name: string, min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

// A reader that goes away (`sim replay … | head`) is no failure: the rest of the output is dropped and the command
// finishes, with the exit code its work earned.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}

const program = new Command();
program.name('sim').description('kube-sim: a local Kubernetes control plane in one process').version('0.1.0');

program
  .command('serve')
  .description('serve the Kubernetes API (in memory unless --data is given)')
  .option('--port <port>', 'port to listen on (0 picks a free one)', integer('--port', 0), 8080)
  .option('--host <host>', 'address to bind', '127.0.0.1')
  .option(
    '--data <path>',
    'keep the cluster across restarts and crashes: a directory (snapshot.json + wal.log), or a snapshot file (+ FILE.wal)',
  )
  .option(
    '--repair',
    'with --data: truncate a corrupt write-ahead log at its first bad record instead of refusing to start',
  )
  .addOption(
    new Option('--clock <mode>', 'real time, or virtual time that moves only when told')
      .choices(['real', 'virtual'])
      .default('real'),
  )
  .option('--seed <n>', 'seed for uids, generated names and IPs (random by default)', integer('--seed', 0))
  .option('--event-ttl <duration>', 'how long Events live after their last write (kube-apiserver --event-ttl)', '1h')
  .option(
    '--watch-history <n>',
    "at most this many events kept per resource for resuming watches (sized by time within it, as kube-apiserver's watch cache)",
    integer('--watch-history', 1),
    10_000,
  )
  .option('--controllers <list>', "controllers to run, kube-controller-manager style ('*', '-name')", '*')
  .addOption(
    new Option('--log-level <level>', 'how much to log').choices(['error', 'warn', 'info', 'debug']).default('info'),
  )
  .option(
    '--nodes <n>',
    'simulated nodes (node-1 … node-N), each with a kubelet; 0 runs no kubelets',
    integer('--nodes', 0),
    3,
  )
  .option(
    '--node-capacity <list>',
    'node capacity, e.g. cpu=8,memory=32Gi,pods=110 (default cpu=4,memory=16Gi,pods=110)',
  )
  .option('--node-profile <file>', 'a partial Node manifest: labels, annotations, taints, status.capacity/allocatable')
  .option('--stages <file>', 'pod lifecycle stages (replaces fixtures/stages/default.yaml)')
  .option('--startup-delay <duration>', 'default kube-sim.dev/startup-delay: ContainerCreating → Running')
  .option('--ready-delay <duration>', 'default kube-sim.dev/ready-delay: Running → Ready')
  .option(
    '--stop-delay <duration>',
    'default kube-sim.dev/stop-delay: how long containers take to exit after SIGTERM (default: the whole grace period)',
  )
  .option(
    '--missing-images <file|list>',
    'images no registry has (their pulls fail: ErrImagePull, ImagePullBackOff): a file, one a line, or a comma list',
  )
  .option('--images <file>', 'what images do: pull failures, default commands, servers (replaces fixtures/images.yaml)')
  .option('--cluster-cidr <cidr>', 'pod IP range; each node gets a /24 of it', '10.244.0.0/16')
  .option('--scheduler', 'run the default scheduler (the default when --nodes > 0)')
  .option('--no-scheduler', 'do not run the default scheduler')
  .option(
    '--auth',
    'require authentication (client certificates with --tls, bearer tokens) and authorize with RBAC; prints an admin token',
  )
  .option('--tls', 'serve HTTPS with a generated CA (kept under --data) and write a kubeconfig that trusts it')
  .option(
    '--kubeconfig <file>',
    'write a kubeconfig for this server here (with --tls: default DATA/tls/kubeconfig, or a temporary directory)',
  )
  .option(
    '--token-auth-file <file>',
    'with --auth: static tokens, kube-apiserver CSV format token,user,uid,"group1,group2"',
  )
  .option(
    '--map-service <mapping>',
    "NAMESPACE/NAME[:PORT]=HOST:PORT: reach this Service (a webhook's clientConfig.service) at a server on the host, as envtest does; repeatable",
    (value: string, previous: string[] = []) => [...previous, value],
  )
  .option(
    '--no-idle-compaction',
    'do not compact the heap when the server goes quiet after it grew (one pause of the server: ~1 s with 30,000 pods)',
  )
  .action(async (opts) => {
    await serve(opts);
  });

program
  .command('kubeconfig')
  .description('print a kubeconfig that points kubectl at a kube-sim server')
  .option('--server <url>', 'server URL', 'http://127.0.0.1:8080')
  .option('--token <token>', 'a bearer token for the user (the admin token sim serve --auth prints)')
  .option(
    '--certificate-authority <file>',
    'the CA of an https server (sim serve --tls --data PATH keeps it in PATH/tls/ca.crt)',
  )
  .action((opts: { server: string; token?: string; certificateAuthority?: string }) => {
    process.stdout.write(
      kubeconfigYaml({
        server: opts.server,
        token: opts.token,
        caCert: opts.certificateAuthority === undefined ? undefined : readFileSync(opts.certificateAuthority, 'utf8'),
      }),
    );
  });

program
  .command('replay')
  .description('run scenario files on a fresh virtual-clock cluster (or --server): timeline, assertions, reports')
  .argument('[files...]', 'scenario files (YAML)')
  .option('--server <url>', 'drive a running sim serve instead of an embedded cluster')
  .option(
    '--kubeconfig <file>',
    "drive the server of this kubeconfig's current context, with its token and CA (--server overrides the server)",
  )
  .option('--token <token>', 'bearer token for the server (the admin token sim serve --auth prints)')
  .option(
    '--certificate-authority <file>',
    'the CA of an https server (sim serve --tls --data PATH keeps it in PATH/tls/ca.crt)',
  )
  .option('--insecure-skip-tls-verify', "do not check an https server's certificate")
  .option('--seed <n>', "override the scenarios' seed", integer('--seed', 0))
  .option('--report <file>', 'write the machine-readable timeline (JSON)')
  .option('--html <file>', 'write a self-contained HTML timeline')
  .option('--no-changes', 'leave the object changes out of the printed timeline')
  .option('--print-schema', 'print the JSON Schema of scenario files and exit')
  .addOption(
    new Option('--log-level <level>', 'how much to log (stderr)')
      .choices(['error', 'warn', 'info', 'debug'])
      .default('warn'),
  )
  .action(async (files: string[], opts) => {
    // Loaded only for this command: sim serve's start-up would pay for the scenario modules (ajv, jsonpath).
    const { replay } = await import('./replay.js');
    await replay(files, opts);
  });

await program.parseAsync(process.argv);
