// What the kernel says about a process: CPU seconds (utime + stime from /proc/PID/stat), the
// resident set now (VmRSS) and its peak (VmHWM) from /proc/PID/status, and the machine's load.
import { readFileSync, readdirSync } from 'node:fs';
import { loadavg } from 'node:os';

// Linux reports times in clock ticks; USER_HZ is 100 on every architecture Node supports.
const CLOCK_TICKS = 100;

export interface ProcessSample {
  /** user + system CPU seconds so far. */
  cpuSeconds: number;
  /** Resident set size now, MiB. */
  rssMiB: number;
  /** Peak resident set size since the process started, MiB. */
  hwmMiB: number;
}

export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces and parentheses: count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // fields[0] is field 3 (state); utime is field 14, stime field 15.
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

export function memory(pid: number): { rssMiB: number; hwmMiB: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { rssMiB: kib('VmRSS') / 1024, hwmMiB: kib('VmHWM') / 1024 };
}

export function sample(pid: number): ProcessSample {
  return { cpuSeconds: cpuSeconds(pid), ...memory(pid) };
}

/** The 1-minute load average, and the number of processors, for the README's noise notes. */
export function machineLoad(): string {
  return loadavg()[0]!.toFixed(2);
}

/** The pids of the processes whose command line (arguments joined by spaces) matches. */
export function findPids(matches: (commandLine: string) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const commandLine = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      if (matches(commandLine)) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** CPU seconds of processes that may have exited (then they count as 0). */
export function cpuSecondsOf(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      total += cpuSeconds(pid);
    } catch {
      // exited
    }
  }
  return total;
}

/** The resident set in two parts (/proc/PID/smaps_rollup), MiB: anonymous memory (heaps, stacks, buffers) and file-backed pages (the binary's code and data, shared libraries). */
export function residentParts(pid: number): { anonymousMiB: number; fileMiB: number } {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? Number.NaN);
  return { anonymousMiB: kib('Anonymous') / 1024, fileMiB: (kib('Rss') - kib('Anonymous')) / 1024 };
}
