import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LookupAddress } from 'node:dns';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import {
  TargetRefusedError,
  checkTargetUrl,
  classifyAddress,
  isAddressAllowed,
  type AddressClass,
  type ResolveHost,
} from './address-guard.js';
import { createGuardedAgent } from './guarded-agent.js';

const answers = (...addresses: string[]): LookupAddress[] =>
  addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

/** A resolver that gives each answer in turn (the last one forever), and counts its calls. */
function scriptedLookup(...script: string[][]): ResolveHost & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    return answers(...(script[Math.min(calls.length, script.length) - 1] ?? []));
  };
  return Object.assign(resolve, { calls });
}

const noLookup: ResolveHost = async () => {
  throw new Error('an IP literal must not be resolved');
};

describe('classifyAddress', () => {
  it.each<[string, AddressClass]>([
    ['8.8.8.8', 'public'],
    ['93.184.216.34', 'public'],
    ['172.32.0.1', 'public'],
    ['100.128.0.1', 'public'],
    ['10.0.0.1', 'private'],
    ['172.16.5.4', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'], // CGNAT
    ['100.127.255.254', 'private'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.1.1', 'link-local'],
    ['169.254.169.254', 'metadata'],
    ['169.254.170.2', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['168.63.129.16', 'metadata'],
    ['192.0.0.192', 'metadata'],
    ['0.0.0.0', 'reserved'],
    ['0.1.2.3', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['224.0.0.1', 'reserved'],
    ['239.255.255.250', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['203.0.113.9', 'reserved'],
    ['240.0.0.1', 'reserved'],
  ])('IPv4 %s is %s', (ip, expected) => {
    expect(classifyAddress(ip)).toBe(expected);
  });

  it.each<[string, AddressClass]>([
    ['2606:4700:4700::1111', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['::1', 'loopback'],
    ['::', 'reserved'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['fc00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['fd00:ec2::254', 'metadata'],
    ['fd20:ce::254', 'metadata'],
    ['ff02::1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:8.8.8.8', 'public'],
    ['::ffff:0:127.0.0.1', 'loopback'], // IPv4-translated (RFC 6145)
    ['64:ff9b::7f00:1', 'loopback'], // NAT64 (RFC 6052) to 127.0.0.1
    ['64:ff9b::808:808', 'public'],
    ['64:ff9b:1::a00:1', 'private'], // local-use NAT64 (RFC 8215)
    ['::7f00:1', 'reserved'], // deprecated IPv4-compatible
    ['2001:db8::1', 'reserved'], // documentation
    ['2002:7f00:1::1', 'reserved'], // 6to4
    ['2001:0:4136:e378::1', 'reserved'], // Teredo
    ['100::1', 'reserved'], // discard-only
    ['fec0::1', 'reserved'], // deprecated site-local
    ['4000::1', 'reserved'], // unallocated
  ])('IPv6 %s is %s', (ip, expected) => {
    expect(classifyAddress(ip)).toBe(expected);
  });

  it.each(['', 'localhost', 'not an ip', '1.2.3.4.5', '::g', '300.1.1.1'])('unparseable %j is reserved', (ip) => {
    expect(classifyAddress(ip)).toBe('reserved');
  });
});

describe('isAddressAllowed', () => {
  it.each<[string, boolean, boolean]>([
    // address, allowed by default, allowed with WEBHOOK_ALLOW_PRIVATE=true
    ['8.8.8.8', true, true],
    ['2606:4700:4700::1111', true, true],
    ['10.1.2.3', false, true],
    ['fd12::1', false, true],
    ['127.0.0.1', false, true],
    ['::1', false, true],
    ['169.254.10.10', false, false],
    ['fe80::1', false, false],
    ['169.254.169.254', false, false],
    ['fd00:ec2::254', false, false],
    ['168.63.129.16', false, false],
    ['0.0.0.0', false, false],
    ['::', false, false],
    ['224.0.0.1', false, false],
  ])('%s: %s by default, %s with allowPrivate', (ip, byDefault, withPrivate) => {
    expect(isAddressAllowed(ip, { allowPrivate: false })).toBe(byDefault);
    expect(isAddressAllowed(ip, { allowPrivate: true })).toBe(withPrivate);
  });
});

describe('checkTargetUrl', () => {
  const refusedWith = (url: string, message: RegExp, options = { allowPrivate: false, lookup: noLookup }) =>
    expect(checkTargetUrl(url, options)).rejects.toSatisfy(
      (error: unknown) => error instanceof TargetRefusedError && message.test(error.message),
    );

  it('accepts a name that resolves only to public addresses', async () => {
    const lookup = scriptedLookup(['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946']);
    await expect(checkTargetUrl('https://receiver.example/hook', { allowPrivate: false, lookup })).resolves.toBeUndefined();
    expect(lookup.calls).toEqual(['receiver.example']);
  });

  it('refuses a name when any one of its addresses is private', async () => {
    const lookup = scriptedLookup(['93.184.216.34', '10.0.0.5']);
    await refusedWith('https://receiver.example/hook', /resolves to a private address; set WEBHOOK_ALLOW_PRIVATE=true/, {
      allowPrivate: false,
      lookup,
    });
  });

  it('names the class of a refused address, never the address (no DNS oracle)', async () => {
    for (const address of ['10.0.0.5', '127.0.0.1', '169.254.169.254', 'fe80::1', '::1']) {
      const refusal = await checkTargetUrl('https://internal.example/', { allowPrivate: false, lookup: scriptedLookup([address]) }).then(
        () => null,
        (error: unknown) => error as Error,
      );
      expect(refusal?.message).toMatch(/^target_url resolves to (a|an) [a-z -]+ address;/);
      expect(refusal?.message).not.toContain(address);
    }
  });

  it('allows private and loopback names with allowPrivate, but never metadata or link-local', async () => {
    await expect(checkTargetUrl('http://svc.internal/', { allowPrivate: true, lookup: scriptedLookup(['10.0.0.5']) })).resolves.toBeUndefined();
    await expect(checkTargetUrl('http://localish/', { allowPrivate: true, lookup: scriptedLookup(['::1']) })).resolves.toBeUndefined();
    await refusedWith('http://meta.internal/', /cloud metadata address; such targets are never allowed/, {
      allowPrivate: true,
      lookup: scriptedLookup(['169.254.169.254']),
    });
    await refusedWith('http://ll.internal/', /link-local address/, { allowPrivate: true, lookup: scriptedLookup(['fe80::1']) });
  });

  it('judges each call afresh: a name that changes its answer is refused when it does', async () => {
    const lookup = scriptedLookup(['93.184.216.34'], ['127.0.0.1']);
    const options = { allowPrivate: false, lookup };
    await expect(checkTargetUrl('https://rebind.example/', options)).resolves.toBeUndefined();
    await refusedWith('https://rebind.example/', /loopback address;/, options);
    expect(lookup.calls).toHaveLength(2);
  });

  it.each([
    ['http://127.0.0.1:8080/hook', /loopback address;/],
    ['http://[::1]/', /loopback address;/],
    ['http://[::ffff:127.0.0.1]/', /loopback address/],
    ['http://2130706433/', /loopback address;/], // WHATWG URL normalises it
    ['http://0x7f.1/', /loopback address;/],
    ['http://10.0.0.1/', /private address/],
    ['http://0.0.0.0/', /reserved/],
    ['http://169.254.169.254/latest/meta-data/', /cloud metadata/],
    ['http://[fd00:ec2::254]/', /cloud metadata/],
  ])('classifies the IP literal in %s without resolving it', async (url, message) => {
    await refusedWith(url, message);
  });

  it('accepts a public IP literal without resolving it', async () => {
    await expect(checkTargetUrl('https://93.184.216.34/x', { allowPrivate: false, lookup: noLookup })).resolves.toBeUndefined();
  });

  it.each([
    ['not a url', /not a valid absolute URL/],
    ['/relative/path', /not a valid absolute URL/],
    ['ftp://receiver.example/', /must use http or https, not ftp/],
    ['file:///etc/passwd', /must use http or https, not file/],
    ['javascript:alert(1)', /must use http or https/],
    ['https://user:pass@receiver.example/', /must not contain a user name or password/],
    ['https://token@receiver.example/', /must not contain a user name or password/],
  ])('refuses %j', async (url, message) => {
    await refusedWith(url, message);
  });

  it('refuses a name that does not resolve, or resolves to nothing', async () => {
    const failing: ResolveHost = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.invalid'), { code: 'ENOTFOUND' });
    };
    await refusedWith('https://nowhere.invalid/', /host nowhere\.invalid could not be resolved \(ENOTFOUND\)/, {
      allowPrivate: false,
      lookup: failing,
    });
    await refusedWith('https://empty.example/', /has no address/, { allowPrivate: false, lookup: scriptedLookup([]) });
  });

  it('uses the system resolver by default (localhost is loopback)', async () => {
    await expect(checkTargetUrl('http://localhost:9/', { allowPrivate: false })).rejects.toThrow(/loopback address/);
  });
});

describe('createGuardedAgent', () => {
  let server: Server;
  let port: number;
  let connections = 0;

  beforeAll(async () => {
    server = createServer((_req, res) => res.end('hello'));
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  /** Makes one GET through `agent` and closes it; resolves to the status or rejects. */
  async function get(url: string, agent: ReturnType<typeof createGuardedAgent>): Promise<number> {
    try {
      const response = await request(url, { dispatcher: agent, signal: AbortSignal.timeout(5000) });
      await response.body.text();
      return response.statusCode;
    } finally {
      await agent.close();
    }
  }

  it('refuses 127.0.0.1 at connect time unless private targets are allowed', async () => {
    const before = connections;
    await expect(get(`http://127.0.0.1:${port}/`, createGuardedAgent({ allowPrivate: false }))).rejects.toThrow(TargetRefusedError);
    await expect(get(`http://127.0.0.1:${port}/`, createGuardedAgent({ allowPrivate: false }))).rejects.toThrow(
      /loopback address; set WEBHOOK_ALLOW_PRIVATE=true/,
    );
    expect(connections).toBe(before); // no socket was ever opened
    expect(await get(`http://127.0.0.1:${port}/`, createGuardedAgent({ allowPrivate: true }))).toBe(200);
  });

  it('re-resolves and re-checks a name at connect time (DNS rebinding)', async () => {
    // At creation the name pointed somewhere public; by send time it points at loopback.
    const lookup = scriptedLookup(['93.184.216.34'], ['127.0.0.1']);
    await checkTargetUrl(`http://rebind.example:${port}/`, { allowPrivate: false, lookup });
    const before = connections;
    await expect(get(`http://rebind.example:${port}/`, createGuardedAgent({ allowPrivate: false, lookup }))).rejects.toThrow(
      TargetRefusedError,
    );
    expect(connections).toBe(before);
    expect(lookup.calls).toEqual(['rebind.example', 'rebind.example']);
  });

  it('connects to the checked address when it is allowed', async () => {
    const lookup = scriptedLookup(['127.0.0.1']);
    expect(await get(`http://anything.example:${port}/`, createGuardedAgent({ allowPrivate: true, lookup }))).toBe(200);
    expect(lookup.calls).toContain('anything.example');
  });

  it('refuses a name whose system resolution is loopback', async () => {
    await expect(get(`http://localhost:${port}/`, createGuardedAgent({ allowPrivate: false }))).rejects.toThrow(TargetRefusedError);
  });
});
