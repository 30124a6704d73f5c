// Webhook receivers for the benchmark: N node:http servers on 127.0.0.1 answering 204, in a
// child process of their own so receiving never competes with the load generator's event
// loop. Each records when a delivery's request arrived (wall clock, sub-millisecond), its
// X-Service-Delivery id, event and, for experience events, the experience id.
//
// Parent side: `Receivers.start(processes, count)`. Child side: this file forked with --child.
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

/** Wall-clock milliseconds with sub-millisecond resolution, comparable across processes. */
export const now = () => performance.timeOrigin + performance.now();

export class Receivers {
  #handle;
  #pending = new Map();
  #nextId = 1;

  constructor(handle, ports) {
    this.#handle = handle;
    this.ports = ports;
    handle.child.on('message', (message) => {
      const waiter = this.#pending.get(message.id);
      if (!waiter) return;
      this.#pending.delete(message.id);
      waiter(message);
    });
  }

  /** Forks the receiver process with `count` servers; resolves once they listen. */
  static async start(processes, count) {
    const handle = processes.start('receivers', fileURLToPath(import.meta.url), ['--child'], { PATH: process.env.PATH ?? '' }, { ipc: true });
    const ports = await new Promise((resolve, reject) => {
      handle.child.once('message', (message) => resolve(message.ports));
      void handle.exited.then((code) => reject(new Error(`receivers exited (${code}):\n${handle.output()}`)));
      handle.child.send({ type: 'listen', count });
    });
    return new Receivers(handle, ports);
  }

  /** The URL of receiver `index`. */
  url(index) {
    return `http://127.0.0.1:${this.ports[index]}/hook`;
  }

  #ask(type) {
    const id = this.#nextId++;
    return new Promise((resolve) => {
      this.#pending.set(id, resolve);
      this.#handle.child.send({ id, type });
    });
  }

  /** Forgets every arrival so far. */
  reset() {
    return this.#ask('reset');
  }

  /** { deliveries: distinct experience deliveries, attempts: all experience requests, pings }. */
  counts() {
    return this.#ask('counts');
  }

  /** First arrival of each experience delivery: [{ guid, hook, experienceId, at }]. */
  async arrivals() {
    return (await this.#ask('arrivals')).arrivals;
  }

  stop() {
    return this.#handle.stop();
  }
}

/** The child: listens, records, answers the parent's questions. */
async function runChild() {
  let first = new Map(); // guid → [hook, experienceId, at]
  let attempts = 0;
  let pings = 0;

  const listen = (hook) => {
    const server = createServer((request, response) => {
      const at = now();
      const chunks = [];
      request.on('data', (chunk) => chunks.push(chunk));
      request.on('end', () => {
        response.writeHead(204).end();
        const event = request.headers['x-service-event'];
        if (event === 'ping') {
          pings++;
          return;
        }
        attempts++;
        const guid = String(request.headers['x-service-delivery'] ?? `unnamed-${attempts}`);
        if (first.has(guid)) return;
        let experienceId = null;
        try {
          experienceId = JSON.parse(Buffer.concat(chunks).toString('utf8'))?.experience?.id ?? null;
        } catch {
          // not JSON: counted, but without an experience id
        }
        first.set(guid, [hook, experienceId, at]);
      });
    });
    server.keepAliveTimeout = 60_000;
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
  };

  process.on('message', async (message) => {
    switch (message.type) {
      case 'listen': {
        const ports = [];
        for (let hook = 0; hook < message.count; hook++) ports.push(await listen(hook));
        process.send({ ports });
        break;
      }
      case 'reset':
        first = new Map();
        attempts = 0;
        pings = 0;
        process.send({ id: message.id });
        break;
      case 'counts':
        process.send({ id: message.id, deliveries: first.size, attempts, pings });
        break;
      case 'arrivals':
        process.send({
          id: message.id,
          arrivals: [...first].map(([guid, [hook, experienceId, at]]) => ({ guid, hook, experienceId, at })),
        });
        break;
    }
  });
  process.once('SIGTERM', () => process.exit(0));
  process.once('disconnect', () => process.exit(0));
}

if (process.argv[2] === '--child') await runChild();
