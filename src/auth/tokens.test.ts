import { randomBytes } from 'node:crypto';
import { SignJWT, UnsecuredJWT, base64url, decodeJwt, decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';
import { InvalidToken } from '../http/errors.js';
import { PasswordChangeLog } from './password-changes.js';
import { AccessTokens, createKeyring, keyId } from './tokens.js';
import type { User } from '../http/caller.js';

const alice: User = { id: 7, username: 'alice', passwordChangedAt: 1_700_000_000_000, roles: [] };

async function setup(options: { secret?: Uint8Array; previous?: Uint8Array[]; lifetime?: number; clock?: { now: number } } = {}) {
  const secret = options.secret ?? randomBytes(32);
  const clock = options.clock ?? { now: Date.now() };
  const changes = new PasswordChangeLog(3_600_000, () => clock.now);
  const keyring = await createKeyring(secret, ...(options.previous ?? []));
  const tokens = new AccessTokens(keyring, options.lifetime ?? 900, changes, () => clock.now);
  return { secret, clock, changes, tokens };
}

async function rejection(promise: Promise<unknown>): Promise<InvalidToken> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidToken);
  return error as InvalidToken;
}

describe('access tokens', () => {
  it('round-trips the user without a database', async () => {
    const { tokens } = await setup();
    const { accessToken, expiresIn } = await tokens.issue(alice);
    expect(expiresIn).toBe(900);
    expect(await tokens.verify(accessToken)).toEqual(alice);
  });

  it('is an HS256 JWT with a kid and the documented claims', async () => {
    const { tokens, secret, clock } = await setup();
    const { accessToken } = await tokens.issue(alice);
    expect(decodeProtectedHeader(accessToken)).toEqual({ alg: 'HS256', kid: keyId(secret), typ: 'JWT' });
    const iat = Math.floor(clock.now / 1000);
    expect(decodeJwt(accessToken)).toEqual({ sub: '7', name: 'alice', pwd: alice.passwordChangedAt, typ: 'access', iat, exp: iat + 900 });
  });

  it('names keys by a short hash that does not reveal them', () => {
    const secret = randomBytes(32);
    expect(keyId(secret)).toMatch(/^[0-9a-f]{12}$/);
    expect(keyId(secret)).toBe(keyId(Buffer.from(secret)));
    expect(keyId(randomBytes(32))).not.toBe(keyId(secret));
  });

  it('refuses an expired token', async () => {
    const { tokens, clock } = await setup({ lifetime: 1 });
    const { accessToken } = await tokens.issue(alice);
    clock.now += 1_500;
    expect((await rejection(tokens.verify(accessToken))).detail).toMatch(/expired/);
  });

  it('refuses tampered, truncated and garbage tokens', async () => {
    const { tokens } = await setup();
    const { accessToken } = await tokens.issue(alice);
    const [header, payload, signature] = accessToken.split('.') as [string, string, string];
    const forged = base64url.encode(JSON.stringify({ ...decodeJwt(accessToken), sub: '1' }));
    for (const bad of [
      `${header}.${forged}.${signature}`,
      `${header}.${payload}.${signature.slice(0, -2)}`,
      `${header}.${payload}`,
      accessToken.slice(0, 40),
      '',
      'not-a-token',
      'a.b.c',
      `${accessToken}x`,
    ]) {
      await rejection(tokens.verify(bad));
    }
  });

  it('refuses alg "none"', async () => {
    const { tokens } = await setup();
    const unsigned = new UnsecuredJWT({ name: 'alice', pwd: alice.passwordChangedAt, typ: 'access' })
      .setSubject('7')
      .setIssuedAt()
      .setExpirationTime('10m')
      .encode();
    await rejection(tokens.verify(unsigned));
  });

  it('refuses other algorithms even with the right key', async () => {
    const { tokens, secret } = await setup();
    const hs512 = await new SignJWT({ name: 'alice', pwd: alice.passwordChangedAt, typ: 'access' })
      .setProtectedHeader({ alg: 'HS512', kid: keyId(secret) })
      .setSubject('7')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(new Uint8Array(Buffer.concat([secret, secret])));
    await rejection(tokens.verify(hs512));
  });

  it('refuses an unknown kid, a missing kid, and a wrong key under a known kid', async () => {
    const { tokens, secret } = await setup();
    const other = randomBytes(32);
    const sign = (header: { alg: string; kid?: string }, key: Uint8Array) =>
      new SignJWT({ name: 'alice', pwd: alice.passwordChangedAt, typ: 'access' })
        .setProtectedHeader(header)
        .setSubject('7')
        .setIssuedAt()
        .setExpirationTime('10m')
        .sign(key);
    expect((await rejection(tokens.verify(await sign({ alg: 'HS256', kid: keyId(other) }, other)))).detail).toMatch(/unknown key/);
    await rejection(tokens.verify(await sign({ alg: 'HS256' }, secret)));
    await rejection(tokens.verify(await sign({ alg: 'HS256', kid: keyId(secret) }, other)));
  });

  it('refuses a JWT signed with its key that is not an access token', async () => {
    const { tokens, secret } = await setup();
    const refreshLike = await new SignJWT({ name: 'alice', pwd: alice.passwordChangedAt, typ: 'refresh' })
      .setProtectedHeader({ alg: 'HS256', kid: keyId(secret) })
      .setSubject('7')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(secret);
    await rejection(tokens.verify(refreshLike));
  });

  it('keeps accepting tokens of a previous key during rotation', async () => {
    const old = await setup();
    const { accessToken } = await old.tokens.issue(alice);
    const rotated = await setup({ secret: randomBytes(32), previous: [old.secret] });
    expect(await rotated.tokens.verify(accessToken)).toEqual(alice);
    const fresh = await rotated.tokens.issue(alice);
    expect(decodeProtectedHeader(fresh.accessToken).kid).toBe(keyId(rotated.secret));
    const retired = await setup({ secret: rotated.secret });
    await rejection(retired.tokens.verify(accessToken));
  });

  it('voids tokens issued before a password change', async () => {
    const { tokens, changes, clock } = await setup();
    const { accessToken } = await tokens.issue(alice);
    changes.note(alice.id, clock.now);
    expect((await rejection(tokens.verify(accessToken))).detail).toMatch(/password has changed/);
    const after = await tokens.issue({ ...alice, passwordChangedAt: clock.now });
    expect((await tokens.verify(after.accessToken)).passwordChangedAt).toBe(clock.now);
  });
});
