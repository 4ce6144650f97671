import { readFileSync } from 'node:fs';
import { Argument, Command, InvalidArgumentError, Option } from 'commander';
import type { RemoteFlags } from './remote.js';

/**
 * The `sim` command tree. Each command loads its own modules when it runs, so `sim clock` or `sim completion` does
 * not pay for the whole server, nor `sim serve` for the scenario runner. The completion scripts are made from this
 * tree (completion.ts), so they cannot drift from it.
 */
function integer(name: string, min: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** --server, --kubeconfig, --context and credentials: how a command finds a running server (remote.ts). */
function remoteOptions(command: Command): Command {
  return command
    .option(
      '--server <url>',
      "the server (default: the current kube-sim context of your kubeconfig, else sim serve's default http://127.0.0.1:8080)",
    )
    .option('--kubeconfig <file>', "use this kubeconfig's current context")
    .option('--context <name>', 'use this context of the kubeconfig (any context, not only kube-sim ones)')
    .option('--token <token>', 'bearer token (the admin token sim serve --auth prints)')
    .option(
      '--certificate-authority <file>',
      'the CA of an https server (sim serve --tls --data PATH keeps it in PATH/tls/ca.crt)',
    )
    .option('--insecure-skip-tls-verify', "do not check an https server's certificate");
}

/** Runs a control command: its one line on stdout, or its failure in one line on stderr and exit code 1. */
async function control(run: () => Promise<string>): Promise<void> {
  const { CommandFailure } = await import('./control.js');
  try {
    process.stdout.write(`${await run()}\n`);
  } catch (err) {
    if (!(err instanceof CommandFailure)) throw err;
    process.stderr.write(`error: ${err.message}\n`);
    process.exitCode = 1;
  }
}

export function buildProgram(): Command {
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
      '--etcd-servers <urls>',
      "keep the cluster in etcd (comma-separated client URLs, as kube-apiserver's flag): several sim serve processes then serve one cluster",
    )
    .option('--etcd-prefix <prefix>', 'with --etcd-servers: the prefix of every key', '/registry')
    .option(
      '--etcd-compaction-interval <duration>',
      "with --etcd-servers: how often etcd's history is compacted (0: never), as kube-apiserver's flag",
      '5m',
    )
    .option(
      '--repair',
      'with --data: truncate a corrupt write-ahead log at its first bad record instead of refusing to start',
    )
    .addOption(
      new Option(
        '--clock <mode>',
        'real time, or virtual time that moves only when told (default: real; virtual with --snapshot)',
      ).choices(['real', 'virtual']),
    )
    .option(
      '--snapshot <file>',
      "boot from a snapshot (sim snapshot export): its nodes get kubelets, its pods stay where they are; the virtual clock starts at the snapshot's time",
    )
    .option(
      '--start-time <time>',
      "where a virtual clock starts (RFC 3339; default: the snapshot's time, else 2025-01-01T00:00:00Z)",
    )
    .option('--seed <n>', 'seed for uids, generated names and IPs (random by default)', integer('--seed', 0))
    .option('--event-ttl <duration>', 'how long Events live after their last write (kube-apiserver --event-ttl)', '1h')
    .option(
      '--watch-history <n>',
      "at most this many events kept per resource for resuming watches (sized by time within it, as kube-apiserver's watch cache)",
      integer('--watch-history', 1),
      10_000,
    )
    .option(
      '--components <list>',
      "what this process runs, of apiserver,controllers,scheduler,kubelets (with --etcd-servers, several processes share the work: controllers and scheduler elect a leader on their Lease; without apiserver and with --kubeconfig, they attach to that API server, any cluster's, as KWOK does)",
      'apiserver,controllers,scheduler,kubelets',
    )
    .addOption(
      new Option(
        '--informers <mode>',
        "shared: this process's controllers, scheduler and kubelets read one informer cache (each kind listed and watched once); separate: each component has its own client, watches and cache, as out-of-process components would",
      )
        .choices(['shared', 'separate'])
        .default('shared'),
    )
    .option('--controllers <list>', "controllers to run, kube-controller-manager style ('*', '-name')", '*')
    .option(
      '--no-metrics-server',
      'serve no metrics.k8s.io: a cluster without metrics-server (kubectl top and HPAs find no metrics API)',
    )
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
    .option(
      '--node-profile <file>',
      'a partial Node manifest: labels, annotations, taints, status.capacity/allocatable',
    )
    .option('--stages <file>', 'pod lifecycle stages (replaces fixtures/stages/default.yaml)')
    .option('--startup-delay <duration>', 'default kube-sim.dev/startup-delay: ContainerCreating → Running')
    .option('--ready-delay <duration>', 'default kube-sim.dev/ready-delay: Running → Ready')
    .option(
      '--stop-delay <duration>',
      'default kube-sim.dev/stop-delay: how long containers take to exit after SIGTERM (default: as each image would)',
    )
    .option(
      '--missing-images <file|list>',
      'images no registry has (their pulls fail: ErrImagePull, ImagePullBackOff): a file, one a line, or a comma list',
    )
    .option(
      '--images <file>',
      'what images do: pull failures, default commands, servers (replaces fixtures/images.yaml)',
    )
    .option(
      '--cluster-cidr <cidr>',
      'pod IP range; each node gets a /24 of it (default 10.244.0.0/16, widened to hold --nodes when not given)',
    )
    .option('--scheduler', 'run the default scheduler (the default when --nodes > 0)')
    .option('--no-scheduler', 'do not run the default scheduler')
    .option(
      '--auth',
      'require authentication (client certificates with --tls, bearer tokens) and authorize with RBAC; prints an admin token',
    )
    .option('--tls', 'serve HTTPS with a generated CA (kept under --data) and write a kubeconfig that trusts it')
    .option(
      '--kubeconfig <file>',
      "with the apiserver component: write a kubeconfig for this server here (with --tls: default DATA/tls/kubeconfig, or a temporary directory); with --components lacking apiserver: read it, and attach the components to its current context's API server, as kube-controller-manager, kube-scheduler and kubelet read theirs",
    )
    .option(
      '--token-auth-file <file>',
      'with --auth: static tokens, kube-apiserver CSV format token,user,uid,"group1,group2"',
    )
    .option(
      '--map-service <mapping>',
      "NAMESPACE/NAME[:PORT]=HOST:PORT: reach this Service (a webhook's clientConfig.service) at a server on the host, as envtest does; repeatable",
      collect,
    )
    .option(
      '--name <name>',
      'add this server to your kubeconfig as context kube-sim-NAME ($KUBECONFIG or ~/.kube/config) and switch to it',
    )
    .option('--no-switch', 'with --name: add the context but leave the current context as it is')
    .option(
      '--no-idle-compaction',
      'do not compact the heap when the server goes quiet after it grew (one pause of the server: ~1 s with 30,000 pods)',
    )
    .action(async (opts, command: Command) => {
      const { serve } = await import('./serve.js');
      // With --snapshot the cluster is the snapshot's nodes: node-1 … node-N only when --nodes asks for them.
      if (opts.snapshot !== undefined && command.getOptionValueSource('nodes') === 'default') opts.nodes = 0;
      await serve(opts);
    });

  const snapshot = program
    .command('snapshot')
    .description("save a cluster's state to a file (sim serve --snapshot boots one from it)");
  remoteOptions(
    snapshot
      .command('export')
      .description(
        'read a cluster (kube-sim or any other) through its API and print its objects as a snapshot: sim snapshot export --kubeconfig FILE > cluster.yaml',
      )
      .option(
        '-n, --namespace <ns>',
        "only this namespace's objects (repeatable or comma-separated; cluster-scoped objects are all read)",
        collect,
      )
      .option('--include-secrets', 'export Secrets too (left out by default; service-account tokens never)')
      .option('--keep-managed-fields', 'keep metadata.managedFields (dropped by default)')
      .addOption(
        new Option(
          '-o, --output <format>',
          'yaml, or json: one JSON document per object (a YAML stream all the same, read back far faster)',
        )
          .choices(['yaml', 'json'])
          .default('yaml'),
      )
      .option('--page-size <n>', 'objects per list request (limit/continue)', integer('--page-size', 1), 500),
  ).action(async (opts) => {
    const { exportSnapshot } = await import('./snapshot.js');
    await exportSnapshot(opts);
  });

  remoteOptions(
    program
      .command('record')
      .description(
        "watch a cluster and write what changed as a trace: a scenario that starts from a snapshot and re-applies the users' changes at their times (sim replay TRACE)",
      )
      .requiredOption('--out <file>', 'the trace to write (its snapshot goes beside it: FILE.snapshot.yaml)')
      .option('--duration <duration>', 'how long to record (wall clock; Ctrl-C stops earlier)', '1h')
      .option(
        '--resources <list>',
        `what to watch (comma-separated; default ${'nodes,pods,deployments,replicasets,…'})`,
      ),
  ).action(async (opts) => {
    const { record } = await import('./record.js');
    await record(opts);
  });

  program
    .command('kubeconfig')
    .description('print a kubeconfig for a kube-sim server, or merge it into yours (--merge)')
    .option('--server <url>', 'server URL', 'http://127.0.0.1:8080')
    .option('--token <token>', 'a bearer token for the user (the admin token sim serve --auth prints)')
    .option(
      '--certificate-authority <file>',
      'the CA of an https server (sim serve --tls --data PATH keeps it in PATH/tls/ca.crt)',
    )
    .option('--name <name>', 'name the context kube-sim-NAME (default kube-sim)')
    .option(
      '--merge',
      'add the context to your kubeconfig ($KUBECONFIG or ~/.kube/config) and switch to it, as kind does',
    )
    .option('--kubeconfig <file>', 'with --merge: the kubeconfig file to merge into')
    .option('--no-switch', 'with --merge: leave the current context as it is')
    .action(
      async (opts: {
        server: string;
        token?: string;
        certificateAuthority?: string;
        name?: string;
        merge?: boolean;
        kubeconfig?: string;
        switch: boolean;
      }) => {
        const { contextName, kubeconfigFileForMerge, kubeconfigYaml, mergeKubeconfig } = await import(
          '../client/kubeconfig.js'
        );
        const connection = {
          server: opts.server,
          token: opts.token,
          caCert: opts.certificateAuthority === undefined ? undefined : readFileSync(opts.certificateAuthority, 'utf8'),
        };
        const name = contextName(opts.name);
        if (!opts.merge) {
          process.stdout.write(kubeconfigYaml(connection, name));
          return;
        }
        const { mergeMessage } = await import('./kubeconfig-merge.js');
        const merged = mergeKubeconfig(opts.kubeconfig ?? kubeconfigFileForMerge(), name, connection, opts.switch);
        process.stdout.write(`${mergeMessage(merged, opts.server)}\n`);
      },
    );

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
    .option('--junit <file>', 'write JUnit XML for CI: a testsuite per scenario, a testcase per step')
    .option('--no-changes', 'leave the object changes out of the printed timeline')
    .option(
      '--ui',
      "serve the live view of the replay's cluster (URL on stderr): start once it is open, keep it up after the end until Ctrl-C",
    )
    .option('--port <port>', 'with --ui: the port to serve on (default: a free one)', integer('--port', 0))
    .option(
      '--pace <rate>',
      'at most this many cluster seconds per wall second while time passes (default 10 with --ui, else no limit; 0: none)',
      (value: string) => {
        const n = Number(value);
        if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('--pace must be a number ≥ 0');
        return n;
      },
    )
    .option(
      '--speed <rate>',
      'the same as --pace (sim replay TRACE --speed 60: an hour of a recording in a minute)',
      (value: string) => {
        const n = Number(value);
        if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('--speed must be a number ≥ 0');
        return n;
      },
    )
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

  const clock = program.command('clock').description("show the cluster's time; advance a virtual clock");
  remoteOptions(clock).action(async (flags: RemoteFlags) => {
    const { clockNow } = await import('./control.js');
    await control(() => clockNow(flags));
  });
  remoteOptions(
    clock
      .command('advance')
      .description('move a virtual clock forward; answers once the work due by then has run')
      .argument('<duration>', 'how far: 90s, 5m, 1h30m, 7d'),
  ).action(async (by: string, _flags: RemoteFlags, command: Command) => {
    const { clockAdvance } = await import('./control.js');
    // `sim clock --server X advance 5m` and `sim clock advance 5m --server X` alike.
    await control(() => clockAdvance(command.optsWithGlobals<RemoteFlags>(), by));
  });

  const node = program.command('node').description('fail, recover and add simulated nodes');
  for (const [action, description] of [
    ['fail', "stop a node's kubelet: no heartbeats, its pods stop progressing (the node goes NotReady after 50 s)"],
    ['recover', "start a failed node's kubelet again"],
  ] as const) {
    remoteOptions(node.command(action).description(description).argument('<name>', 'the node')).action(
      async (name: string, flags: RemoteFlags) => {
        const { nodeFault } = await import('./control.js');
        await control(() => nodeFault(flags, action, name));
      },
    );
  }
  remoteOptions(
    node
      .command('add')
      .description('register a node (a kubelet joins): the node simulator adopts it and it turns Ready')
      .argument('[name]', 'its name (default: the next node-N)')
      .option('--capacity <list>', "capacity, e.g. cpu=8,memory=32Gi,pods=110 (default: the server's --node-capacity)")
      .option('--label <key=value>', 'a label (repeatable)', collect)
      .option('--taint <key[=value]:effect>', 'a taint, e.g. dedicated=gpu:NoSchedule (repeatable)', collect),
  ).action(
    async (name: string | undefined, opts: RemoteFlags & { capacity?: string; label?: string[]; taint?: string[] }) => {
      const { nodeAdd } = await import('./control.js');
      await control(() => nodeAdd(opts, name, opts));
    },
  );

  program
    .command('completion')
    .description('print a shell completion script: source <(sim completion bash)')
    .addArgument(new Argument('<shell>', 'bash, zsh or fish').choices(['bash', 'zsh', 'fish']))
    .action(async (shell: 'bash' | 'zsh' | 'fish') => {
      const { completionScript } = await import('./completion.js');
      process.stdout.write(completionScript(program, shell));
    });

  return program;
}
