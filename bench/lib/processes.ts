/**
 * The server processes a benchmark starts: tracked so a watchdog or a signal can kill every one
 * of them, stopped gently (SIGTERM, then SIGKILL), and their memory read from /proc.
 */
import type { ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

const live = new Set<ChildProcess>();

/** Registers a child until it exits, so killAll() reaches it. */
export function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

/** For a watchdog or a signal handler: SIGKILL every tracked child now. */
export function killAll(): void {
  for (const c of live) c.kill("SIGKILL");
}

const exited = (c: ChildProcess) => c.exitCode !== null || c.signalCode !== null;

/** SIGTERM, then SIGKILL when the child has not exited `graceMs` later; resolves on exit. */
export async function stopChild(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (exited(child)) return;
  const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await gone;
  clearTimeout(kill);
  live.delete(child);
}

/** VmRSS and VmHWM (peak) of a process in KiB from /proc/<pid>/status; undefined once it is gone. */
export function memoryOf(pid: number): { rssKiB: number; hwmKiB: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(text)?.[1]);
    const rssKiB = kib("VmRSS");
    const hwmKiB = kib("VmHWM");
    return Number.isFinite(rssKiB)
      ? { rssKiB, hwmKiB: Number.isFinite(hwmKiB) ? hwmKiB : rssKiB }
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * CPU time (user + system) a process has used so far, in milliseconds, from /proc/<pid>/stat;
 * undefined once it is gone. On a loaded machine this is the fairer measure of the work per
 * request: the wall-clock rates also count the time the process waited for a core.
 */
export function cpuMsOf(pid: number): number | undefined {
  try {
    return statCpuMs(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return undefined;
  }
}

/** utime + stime in ms from the text of a /proc/<pid>[/task/<tid>]/stat file. */
function statCpuMs(text: string): number | undefined {
  // The command (field 2) is in parentheses and may hold spaces: fields count from its end.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
  return Number.isFinite(ticks) ? ticks * (1000 / CLOCK_TICKS) : undefined;
}

/** USER_HZ: 100 on every Linux this runs on (sysconf(_SC_CLK_TCK)). */
const CLOCK_TICKS = 100;

/**
 * CPU ms per kind of thread, over all the processes: Node's main thread, libuv's thread pool
 * (file-system calls, and their kernel time), V8's workers (GC, compilers), the rest. Where a
 * store's work lands: a file store's fsyncs and inode allocations are pool time.
 */
export function cpuMsByThread(pids: readonly number[]): Record<ThreadKind, number> {
  const out: Record<ThreadKind, number> = { main: 0, pool: 0, v8: 0, other: 0 };
  for (const pid of pids) {
    let tids: string[];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const text = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        const name = text.slice(text.indexOf("(") + 1, text.lastIndexOf(")"));
        out[threadKind(name, tid === String(pid))] += statCpuMs(text) ?? 0;
      } catch {
        // the thread ended between the listing and the read
      }
    }
  }
  return out;
}

export type ThreadKind = "main" | "pool" | "v8" | "other";

function threadKind(name: string, isMain: boolean): ThreadKind {
  if (isMain) return "main";
  if (name.startsWith("libuv-worker")) return "pool";
  if (name.startsWith("V8Worker") || name.startsWith("V8 ")) return "v8";
  return "other";
}

/** CPU ms of all the processes, summed (a missing one counts 0). */
export const cpuMsOfAll = (pids: readonly number[]): number =>
  pids.reduce((a, pid) => a + (cpuMsOf(pid) ?? 0), 0);

export interface RssSampler {
  /** The current RSS of each process (KiB), summed. */
  now(): number;
  /** Stops sampling; the peak per process (KiB): the larger of the samples and VmHWM. */
  stop(): number[];
}

/** Samples VmRSS of the processes every `everyMs` until stop(). */
export function sampleRss(pids: readonly number[], everyMs = 100): RssSampler {
  const peaks = pids.map(() => 0);
  const take = () => {
    pids.forEach((pid, i) => {
      const m = memoryOf(pid);
      if (m) peaks[i] = Math.max(peaks[i] as number, m.rssKiB, m.hwmKiB);
    });
  };
  take();
  const timer = setInterval(take, everyMs);
  timer.unref();
  return {
    now: () => pids.reduce((a, pid) => a + (memoryOf(pid)?.rssKiB ?? 0), 0),
    stop() {
      take();
      clearInterval(timer);
      return peaks;
    },
  };
}
