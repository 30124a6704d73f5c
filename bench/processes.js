// Every child process, temp folder and throw-away database the benchmark makes, so that one
// `cleanUp()` (from a finally block or a SIGINT handler) removes all of them, by pid.
import { fork, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

const LISTENING = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/;

/** A free TCP port on 127.0.0.1 (asked of the kernel, then released for the child to take). */
export async function freePort() {
  const probe = createServer();
  await new Promise((resolve, reject) => probe.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** What a child printed so far, last `max` characters. */
function tail(text, max = 2000) {
  return text.length > max ? `…${text.slice(-max)}` : text;
}

export class Processes {
  /** child → promise of its exit code or signal */
  #children = new Map();
  #dirs = new Set();
  #undo = [];

  /** A fresh temp folder, removed by cleanUp(). */
  tempDir(prefix) {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    this.#dirs.add(dir);
    return dir;
  }

  /** A fresh PostgreSQL database next to `adminUrl`; dropped (with force) by cleanUp(). */
  async database(adminUrl) {
    const name = `restwire_bench_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    try {
      await admin.query(`create database ${name}`);
    } finally {
      await admin.end();
    }
    this.#undo.push(async () => {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`drop database if exists ${name} with (force)`);
      } finally {
        await client.end();
      }
    });
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    return url.toString();
  }

  /** Spawns `node [nodeArgs] script ...args` (or forks it with IPC), tracked until it exits. */
  start(name, script, args, env, { ipc = false, nodeArgs = [] } = {}) {
    const options = { env, stdio: ipc ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'] };
    const child = ipc ? fork(script, args, nodeArgs.length ? { ...options, execArgv: nodeArgs } : options) : spawn(process.execPath, [...nodeArgs, script, ...args], options);
    let output = '';
    child.stdout.on('data', (chunk) => (output = tail(output + chunk.toString(), 20_000)));
    child.stderr.on('data', (chunk) => (output = tail(output + chunk.toString(), 20_000)));
    const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
    this.#children.set(child, exited);
    void exited.then(() => this.#children.delete(child));
    return {
      name,
      child,
      pid: child.pid,
      exited,
      output: () => output,
      alive: () => child.exitCode === null && child.signalCode === null,
      stop: () => this.#stop(child, exited),
    };
  }

  /**
   * Starts an HTTP server child on a free port and waits until it answers. restwire at
   * LOG_LEVEL=warn prints no "Server listening" line (that is an info log), so readiness is
   * either that line or an answer to GET `readyPath`.
   */
  async startServer(name, script, args, env, { readyPath = '/healthz', timeoutMs = 30_000, nodeArgs = [] } = {}) {
    const port = await freePort();
    const handle = this.start(name, script, args, { ...env, HOST: '127.0.0.1', PORT: String(port) }, { nodeArgs });
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!handle.alive()) throw new Error(`${name} exited before listening:\n${tail(handle.output())}`);
      if (LISTENING.test(handle.output())) return { ...handle, url, port };
      try {
        const response = await fetch(`${url}${readyPath}`);
        await response.arrayBuffer();
        if (response.status < 500) return { ...handle, url, port };
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
    await handle.stop();
    throw new Error(`${name} did not start within ${timeoutMs / 1000} s:\n${tail(handle.output())}`);
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code or signal. */
  async #stop(child, exited, graceMs = 5000) {
    if (child.exitCode !== null || child.signalCode !== null) return exited;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops every child still running, drops the databases, removes the temp folders. */
  async cleanUp() {
    await Promise.all([...this.#children].map(([child, exited]) => this.#stop(child, exited)));
    for (const undo of this.#undo.splice(0).reverse()) {
      try {
        await undo();
      } catch (error) {
        process.stderr.write(`bench: cleanup failed: ${error.message}\n`);
      }
    }
    this.cleanUpNow();
  }

  /** The synchronous last resort (process 'exit'): SIGKILL by pid, remove folders. */
  cleanUpNow() {
    for (const child of this.#children.keys()) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    for (const dir of this.#dirs) rmSync(dir, { recursive: true, force: true });
    this.#dirs.clear();
  }
}
