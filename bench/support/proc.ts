/**
 * What the kernel says a process costs (Linux /proc): CPU seconds and resident memory, read by the benchmark, not
 * claimed by the process.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const CLOCK_TICKS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** User + system CPU seconds of one process (all its threads), 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    // Fields after the command name, which may hold spaces: utime and stime are the 14th and 15th of the line.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/** User + system CPU seconds of several processes (a server's pids, say). */
export const totalCpuSeconds = (pids: readonly number[]): number => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);

/**
 * User + system CPU seconds of this process's children that have exited and been waited for (a finished `s5cmd`, say).
 */
export function exitedChildrenCpuSeconds(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // cutime and cstime: the 16th and 17th fields of the line.
  return (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS;
}

/** Resident set size in bytes, 0 once the process is gone. */
export function rssBytes(pid: number): number {
  try {
    const kb = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return Number(kb ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/** Processes whose command line holds every one of `args` (servers found by the port they were started on). */
export function pidsWithArgs(...args: string[]): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args.every((a) => argv.includes(a))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Busy and total CPU seconds of the whole machine since boot, from /proc/stat. */
export function machineCpuSeconds(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((a, b) => a + b, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: (total - idle) / CLOCK_TICKS, total: total / CLOCK_TICKS };
}
