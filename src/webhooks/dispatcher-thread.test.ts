import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../config.js';
import { DispatcherThread } from './dispatcher-thread.js';

// The supervision of the dispatcher thread: a thread that fails is logged and started again, and
// one that keeps failing stops the process. The programs below stand in for the dispatcher so
// that they fail when the test says (the real one is exercised by the black-box webhook tests).

const folder = mkdtempSync(join(tmpdir(), 'restwire-thread-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** A thread program: answers like the dispatcher's, and runs `onWake` when woken. */
function program(name: string, { onStart = '', onWake = '' }: { onStart?: string; onWake?: string }): URL {
  const path = join(folder, `${name}.mjs`);
  writeFileSync(
    path,
    `import { parentPort, threadId } from 'node:worker_threads';
${onStart}
parentPort.on('message', (message) => {
  if (message.type === 'wake') { ${onWake} }
  if (message.type === 'metrics') parentPort.postMessage({ type: 'metrics', id: message.id, text: 'thread_id ' + threadId + '\\n' });
  if (message.type === 'stop') setTimeout(() => process.exit(0), 50);
});
parentPort.postMessage({ type: 'started' });
`,
  );
  return pathToFileURL(path);
}

function recordingLog() {
  const lines: Array<{ level: number; msg: string; err?: { message: string } }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { log, lines };
}

const config = loadConfig({ DATA_DIR: folder });
const until = async (check: () => boolean | Promise<boolean>) => {
  const deadline = Date.now() + 10_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met within 10 s');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe('DispatcherThread', () => {
  it('logs a thread that fails and starts it again', async () => {
    const { log, lines } = recordingLog();
    const fatal: Error[] = [];
    const thread = new DispatcherThread({
      config,
      secretKey: 'x'.repeat(32),
      log,
      onFatal: (error) => fatal.push(error),
      entry: program('fails-on-wake', { onWake: "throw new Error('claim went wrong')" }),
      restartDelayMs: 10,
    });
    await thread.start();
    const first = await thread.metricsText();
    expect(first).toMatch(/^thread_id \d+/);
    thread.wake();
    await until(() => lines.some((line) => line.msg === 'the dispatcher thread stopped; starting it again'));
    expect(lines.find((line) => line.msg === 'the dispatcher thread failed')?.err?.message).toBe('claim went wrong');
    // A new thread answers.
    await until(async () => !['', first].includes(await thread.metricsText()));
    expect(fatal).toEqual([]);
    await thread.stop();
    expect(await thread.metricsText()).toBe('');
  });

  it('stops the process (onFatal) when the thread keeps failing', async () => {
    const { log, lines } = recordingLog();
    const fatal: Error[] = [];
    const thread = new DispatcherThread({
      config,
      secretKey: 'x'.repeat(32),
      log,
      onFatal: (error) => fatal.push(error),
      entry: program('fails-after-start', { onStart: "setTimeout(() => { throw new Error('database gone'); }, 20);" }),
      restartDelayMs: 10,
    });
    await thread.start();
    await until(() => fatal.length > 0);
    expect(fatal[0]!.message).toBe('database gone');
    expect(lines.filter((line) => line.msg === 'the dispatcher thread failed')).toHaveLength(6);
    expect(lines.at(-1)?.msg).toBe('the dispatcher thread keeps failing; stopping');
    await thread.stop();
  });

  it('rejects start when the thread fails before it starts', async () => {
    const { log } = recordingLog();
    const thread = new DispatcherThread({
      config,
      secretKey: 'x'.repeat(32),
      log,
      onFatal: () => {},
      entry: program('cannot-start', { onStart: "throw new Error('no database');" }),
    });
    await expect(thread.start()).rejects.toThrow('no database');
  });
});
