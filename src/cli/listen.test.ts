import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { experiences } from '../resources/experiences.js';
import { describeEvents } from '../resources/openapi/events.js';
import { request } from 'undici';
import { createGuardedAgent } from '../webhooks/guarded-agent.js';
import { InvalidSecretError, generateSecret } from '../webhooks/secrets.js';
import { sendAttempt } from '../webhooks/send-attempt.js';
import { signDelivery } from '../webhooks/signing.js';
import { loadEventCatalog } from './event-catalog.js';
import { startListener, type Listener } from './listen.js';

/** Collects what the listener prints. */
function capture(): { write(text: string): void; text: string } {
  return {
    text: '',
    write(text: string) {
      this.text += text;
    },
  };
}

describe('startListener', () => {
  const secret = generateSecret();
  const agent = createGuardedAgent({ allowPrivate: true });
  let listener: Listener | undefined;

  afterEach(async () => {
    await listener?.close();
    listener = undefined;
  });

  const body = JSON.stringify({ action: 'created', experience: { id: 42, title: 'Tea' } });

  /** Sends a delivery the way the dispatcher does, signed with `secrets`. */
  const deliver = (port: number, secrets: string[], extraBody = '') =>
    sendAttempt({
      url: `http://127.0.0.1:${port}/hooks/restwire`,
      headers: {
        'x-service-delivery': 'b2f1c1de-0000-4000-8000-000000000042',
        'x-service-event': 'experience',
        'x-service-hook-id': '7',
        ...signDelivery({
          deliveryId: 'b2f1c1de-0000-4000-8000-000000000042',
          timestamp: Math.floor(Date.now() / 1000),
          body,
          secrets,
        }),
      },
      body: body + extraBody,
      dispatcher: agent,
      timeoutMs: 5000,
    });

  it('answers 204 to a signed delivery and prints it', async () => {
    const out = capture();
    listener = await startListener({ port: 0, secret, out });
    expect(listener.port).toBeGreaterThan(0);

    const outcome = await deliver(listener.port, [secret]);
    expect(outcome).toMatchObject({ ok: true, statusCode: 204 });
    expect(out.text).toMatch(/^── \d{4}-\d\d-\d\dT[\d:.]+Z {2}POST \/hooks\/restwire\n/);
    expect(out.text).toContain('event     experience');
    expect(out.text).toContain('delivery  b2f1c1de-0000-4000-8000-000000000042');
    expect(out.text).toContain('hook      7');
    expect(out.text).toContain('verified  ✓');
    expect(out.text).toContain('  "action": "created",'); // pretty-printed JSON
  });

  it('accepts a rotation overlap signed with the previous secret as well', async () => {
    listener = await startListener({ port: 0, secret, out: capture() });
    expect((await deliver(listener.port, [generateSecret(), secret])).statusCode).toBe(204);
  });

  it('answers 401 to a bad signature or a tampered body, and says so', async () => {
    const out = capture();
    listener = await startListener({ port: 0, secret, out });

    const wrongSecret = await deliver(listener.port, [generateSecret()]);
    expect(wrongSecret.statusCode).toBe(401);
    expect(wrongSecret.responseBody).toBe('signature verification failed\n');

    expect((await deliver(listener.port, [secret], ' ')).statusCode).toBe(401);
    expect(out.text.match(/verified {2}✗/g)).toHaveLength(2);
    expect(out.text).not.toContain('✓');
  });

  it('answers 401 to an unsigned POST and prints a non-JSON body safely', async () => {
    const out = capture();
    listener = await startListener({ port: 0, secret, out });
    const response = await request(`http://127.0.0.1:${listener.port}/x`, {
      method: 'POST',
      body: 'plain \u001b[31mred\u001b[0m text',
    });
    expect(response.statusCode).toBe(401);
    await response.body.text();
    expect(out.text).toContain('plain \uFFFD[31mred\uFFFD[0m text');
    expect(out.text).not.toContain('\u001b');
  });

  // C1 controls (U+009B is CSI, as ESC [ is) and bidi controls (Trojan Source, CVE-2021-42574).
  const UNSAFE = ['\u0085', '\u009b', '\u061c', '\u200e', '\u200f', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069'];

  it('escapes C1 and bidi controls in a JSON body as it escapes C0 controls, \\u-escaped', async () => {
    const out = capture();
    listener = await startListener({ port: 0, secret, out });
    const text = JSON.stringify({ c0: '\u001b[31m', unsafe: UNSAFE.join('|') });
    const response = await request(`http://127.0.0.1:${listener.port}/x`, { method: 'POST', body: text });
    expect(response.statusCode).toBe(401);
    await response.body.text();
    expect(out.text).toContain('"c0": "\\u001b[31m"');
    expect(out.text).toContain(`"unsafe": "${UNSAFE.map((c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`).join('|')}"`);
    for (const c of UNSAFE) expect(out.text).not.toContain(c);
  });

  it('replaces C1 and bidi controls in a non-JSON body as it replaces C0 controls', async () => {
    const out = capture();
    listener = await startListener({ port: 0, secret, out });
    const response = await request(`http://127.0.0.1:${listener.port}/x`, { method: 'POST', body: `plain ${UNSAFE.join('|')} text` });
    expect(response.statusCode).toBe(401);
    await response.body.text();
    expect(out.text).toContain(`plain ${UNSAFE.map(() => '\uFFFD').join('|')} text`);
  });

  it('answers 405 to anything but POST', async () => {
    listener = await startListener({ port: 0, secret, out: capture() });
    const response = await request(`http://127.0.0.1:${listener.port}/`);
    expect(response.statusCode).toBe(405);
    expect(response.headers.allow).toBe('POST');
    await response.body.text();
  });

  it('refuses an unusable secret or port at start-up', async () => {
    await expect(startListener({ port: 0, secret: 'hunter2', out: capture() })).rejects.toThrow(InvalidSecretError);
    await expect(startListener({ port: 70_000, secret, out: capture() })).rejects.toThrow(/port must be/);
  });

  it('rejects when the port is taken, and stops answering once closed', async () => {
    listener = await startListener({ port: 0, secret, out: capture() });
    const { port } = listener;
    await expect(startListener({ port, secret, out: capture() })).rejects.toThrow(/EADDRINUSE/);
    await listener.close();
    listener = undefined;
    expect((await deliver(port, [secret])).error).toBe('connection refused');
  });
});

describe('startListener --validate', () => {
  const secret = generateSecret();
  const agent = createGuardedAgent({ allowPrivate: true });
  let listener: Listener | undefined;
  afterEach(async () => {
    await listener?.close();
    listener = undefined;
  });

  const send = (port: number, event: string, body: string) =>
    sendAttempt({
      url: `http://127.0.0.1:${port}/`,
      headers: {
        'x-service-delivery': 'b2f1c1de-0000-4000-8000-000000000043',
        'x-service-event': event,
        ...signDelivery({ deliveryId: 'b2f1c1de-0000-4000-8000-000000000043', timestamp: Math.floor(Date.now() / 1000), body, secrets: [secret] }),
      },
      body,
      dispatcher: agent,
      timeoutMs: 5000,
    });

  const valid = {
    action: 'updated',
    experience: {
      url: 'http://127.0.0.1:8000/api/v1/experiences/42/',
      number: 42,
      id: 42,
      title: 'Tea',
      q_like_dislike: 'like',
      owner: '/api/v1/users/3/',
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
    },
    changes: { title: { from: 'Coffee' } },
    repository: { id: 1, full_name: 'alice/experiences', owner: { login: 'alice', id: 3 } },
    sender: { login: 'alice', id: 3 },
    filter: { matched_before: true, matched_after: true },
  };

  it("checks each body against its event's schema from a saved catalog, and says what does not match", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'restwire-catalog-'));
    const file = join(dir, 'events.json');
    writeFileSync(file, JSON.stringify({ results: describeEvents([experiences]) }));
    try {
      const validator = await loadEventCatalog(file);
      expect(validator.events).toEqual(['experience', 'ping']);
      const out = capture();
      listener = await startListener({ port: 0, secret, out, validator });
      expect((await send(listener.port, 'experience', JSON.stringify(valid))).statusCode).toBe(204);
      expect(out.text).toContain('schema    ✓ matches the experience schema');
      const { title: _title, ...untitled } = valid.experience;
      await send(listener.port, 'experience', JSON.stringify({ ...valid, action: 'renamed', experience: untitled }));
      expect(out.text).toMatch(/schema {4}✗ does NOT match the experience schema: .*\/action must be equal to one of the allowed values.*must have required property 'title'/);
      // The catalog has `ping` (issue 22 item 18): a ping is checked like any event.
      const ping = { zen: 'Keep it logically awesome.', hook_id: 7, hook: { type: 'Repository', id: 7, active: true }, sender: { login: 'alice', id: 3 } };
      await send(listener.port, 'ping', JSON.stringify(ping));
      expect(out.text).toContain('schema    ✓ matches the ping schema');
      await send(listener.port, 'ping', JSON.stringify({ zen: 'Keep it logically awesome.' }));
      expect(out.text).toMatch(/schema {4}✗ does NOT match the ping schema: .*must have required property 'hook_id'/);
      await send(listener.port, 'nosuchevent', JSON.stringify({}));
      expect(out.text).toContain('– no schema for "nosuchevent" in the catalog');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a catalog that is not one, at start-up', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'restwire-catalog-'));
    const file = join(dir, 'events.json');
    writeFileSync(file, '{"openapi": "3.1.0"}');
    try {
      await expect(loadEventCatalog(file)).rejects.toThrow(/no "results" list/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
