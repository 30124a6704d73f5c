// Peak resident memory of server processes during one scenario (issue #6: "peak RSS ≤ 150 MB").
// Linux only: /proc/<pid>/status. Writing 5 to /proc/<pid>/clear_refs resets VmHWM (the kernel's
// own high-water mark) so it covers this scenario only; VmRSS is also sampled every 100 ms in
// case the reset is refused. Elsewhere the figure is null. CPU time comes from /proc/<pid>/stat
// and /proc/stat (cpuSeconds, watchCpu), null elsewhere too.
import { readFileSync, writeFileSync } from 'node:fs';

const KIB = 1024;

/** VmRSS and VmHWM of a process in bytes, or null when /proc cannot be read. */
function readStatus(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name) => {
      const match = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status);
      return match ? Number(match[1]) * KIB : null;
    };
    return { rss: field('VmRSS'), hwm: field('VmHWM') };
  } catch {
    return null;
  }
}

function resetHighWaterMark(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * Starts watching `pids`; `stop()` returns each one's peak RSS in bytes since the start
 * (null where it could not be read). For the pids in `whole`, the process's whole life counts
 * instead (processes started for this phase, whose first moments are part of it).
 */
export function watchPeakRss(pids, { whole = [], intervalMs = 100 } = {}) {
  const watched = pids.map((pid) => ({
    pid,
    useHwm: whole.includes(pid) || resetHighWaterMark(pid),
    peak: readStatus(pid)?.rss ?? null,
  }));
  const sampling = sampleEvery(intervalMs, () => {
    for (const entry of watched) {
      const rss = readStatus(entry.pid)?.rss;
      if (rss != null && (entry.peak === null || rss > entry.peak)) entry.peak = rss;
    }
  });
  return {
    stop() {
      sampling.stop();
      return watched.map((entry) => {
        const hwm = entry.useHwm ? readStatus(entry.pid)?.hwm ?? null : null;
        return hwm !== null && (entry.peak === null || hwm > entry.peak) ? hwm : entry.peak;
      });
    },
  };
}

/** A process's private memory in bytes (its pages no other process maps: USS), or null. */
function readPrivate(pid) {
  try {
    const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? Number.NaN) * KIB;
    const bytes = field('Private_Clean') + field('Private_Dirty');
    return Number.isNaN(bytes) ? null : bytes;
  } catch {
    return null;
  }
}

/**
 * Starts watching the memory a process and its children take together; `stop()` returns the
 * peak, in bytes, of the first one's RSS plus the others' private memory (null where /proc cannot
 * tell). RSS summed over processes counts the pages they share (Node's binary and libraries,
 * about 45 MiB) once per process; here they count once, as the machine holds them: what the
 * first maps, and what each child adds. For serve with its dispatcher process, or a cluster.
 */
export function watchPeakTree([root, ...children], { intervalMs = 100 } = {}) {
  let peak = null;
  const sampling = sampleEvery(intervalMs, () => {
    let sum = readStatus(root)?.rss ?? null;
    if (sum === null) return;
    for (const pid of children) {
      const own = readPrivate(pid);
      if (own === null) return;
      sum += own;
    }
    if (peak === null || sum > peak) peak = sum;
  });
  return {
    stop() {
      sampling.stop();
      return peak;
    },
  };
}

/** Calls `sample` now and every `intervalMs` (never keeping the process alive) until `stop()`, which samples once more. */
function sampleEvery(intervalMs, sample) {
  sample();
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      sample();
    },
  };
}

/** Bytes as MiB with one decimal, or null. */
export function mib(bytes) {
  return bytes == null ? null : Math.round((bytes / (KIB * KIB)) * 10) / 10;
}

/** A process and its descendants (Linux: /proc/<pid>/task/<tid>/children), for cluster servers. */
export function processTree(pid) {
  const pids = [pid];
  for (let i = 0; i < pids.length; i++) {
    try {
      const children = readFileSync(`/proc/${pids[i]}/task/${pids[i]}/children`, 'utf8').trim();
      if (children) pids.push(...children.split(/\s+/).map(Number));
    } catch {
      // Not Linux, or the process is gone: what was found so far.
    }
  }
  return pids;
}

/**
 * User and kernel CPU seconds the processes have used so far, added up (Linux /proc/<pid>/stat),
 * or null where it cannot be read.
 */
export function cpuSeconds(pids) {
  let user = 0;
  let system = 0;
  for (const pid of pids) {
    const times = processCpuTimes(pid);
    if (times === null) return null;
    user += times.user;
    system += times.system;
  }
  return { user, system };
}

// Clock ticks per second in /proc: USER_HZ, 100 on every Linux Node runs on.
const USER_HZ = 100;

/** One process's user and kernel CPU seconds so far, or null when it is gone or /proc is missing. */
function processCpuTimes(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return { user: Number(fields[11]) / USER_HZ, system: Number(fields[12]) / USER_HZ };
  } catch {
    return null;
  }
}

function processCpuSeconds(pid) {
  const times = processCpuTimes(pid);
  return times === null ? null : times.user + times.system;
}

/** Busy CPU seconds of the whole machine so far, every core added up (/proc/stat: all but idle and iowait). */
function machineBusySeconds() {
  try {
    const [user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    return (user + nice + system + irq + softirq + steal) / USER_HZ;
  } catch {
    return null;
  }
}

/**
 * Where the machine's CPU goes during a timed run (issue 21: what limits first when everything
 * shares one machine). Counts, from now until `stop()`, the CPU seconds of each named group of
 * processes (`groups`: [{ name, pids }]; a pid gone by the end counts for nothing), of this
 * process (the load generator: autocannon runs in it) and of the whole machine (other work on it
 * included). `stop()` returns { wallSeconds, groups: { name: seconds }, loadGenerator, machine },
 * a figure null where /proc could not tell.
 */
export function watchCpu(groups) {
  const started = performance.now();
  const before = groups.map(({ name, pids }) => ({ name, pids: pids.map((pid) => [pid, processCpuSeconds(pid)]) }));
  const ownBefore = process.cpuUsage();
  const machineBefore = machineBusySeconds();
  return {
    stop() {
      const own = process.cpuUsage(ownBefore);
      const machineAfter = machineBusySeconds();
      const seconds = {};
      for (const { name, pids } of before) {
        let sum = 0;
        let read = false;
        for (const [pid, start] of pids) {
          const end = processCpuSeconds(pid);
          if (start === null || end === null) continue;
          sum += end - start;
          read = true;
        }
        seconds[name] = read ? sum : null;
      }
      return {
        wallSeconds: (performance.now() - started) / 1000,
        groups: seconds,
        loadGenerator: (own.user + own.system) / 1e6,
        machine: machineBefore === null || machineAfter === null ? null : machineAfter - machineBefore,
      };
    },
  };
}
