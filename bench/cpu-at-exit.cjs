// Preloaded (node --require) into a process a benchmark times from outside: at exit it writes the process's own CPU
// time (user + system, all threads, ms) to the file KUBE_SIM_BENCH_CPU_FILE names, which only the process can read.
const { writeFileSync } = require('node:fs');
process.on('exit', () => {
  const cpu = process.cpuUsage();
  writeFileSync(process.env.KUBE_SIM_BENCH_CPU_FILE, String((cpu.user + cpu.system) / 1000));
});
