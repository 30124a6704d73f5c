import { promises as dns, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

// SSRF protection for webhook targets (API.md §4 Subscriptions, §6 "Webhook records"): private,
// loopback, link-local and metadata addresses are refused at creation and again at send time,
// after DNS resolution (guarded-agent.ts); WEBHOOK_ALLOW_PRIVATE=true admits private and
// loopback ranges only.

/** What an IP address is, as far as sending a webhook to it is concerned. */
export type AddressClass = 'public' | 'private' | 'loopback' | 'link-local' | 'metadata' | 'reserved';

/** Options shared by the checks: whether WEBHOOK_ALLOW_PRIVATE is on. */
export interface GuardOptions {
  allowPrivate: boolean;
}

/** Resolves a host name to all its addresses, as `dns.promises.lookup(name, { all: true })` does. */
export type ResolveHost = (hostname: string) => Promise<readonly LookupAddress[]>;

/** Thrown (or passed to a connect callback) when a webhook target may not be contacted. */
export class TargetRefusedError extends Error {
  override readonly name = 'TargetRefusedError';
  readonly code = 'WEBHOOK_TARGET_REFUSED';
}

// Cloud instance-metadata and host-agent endpoints hand out credentials to whoever asks from
// inside the instance, so they stay refused even with WEBHOOK_ALLOW_PRIVATE=true. Some lie in
// ranges that would otherwise be allowed (Alibaba in CGNAT space, Azure's in public space).
const METADATA_CIDRS = [
  '169.254.169.254/32', // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle IMDS
  '169.254.170.2/32', // AWS ECS task metadata and credentials
  '169.254.170.23/32', // AWS EKS Pod Identity agent
  '100.100.100.200/32', // Alibaba Cloud metadata
  '168.63.129.16/32', // Azure WireServer / host agent
  '192.0.0.192/32', // Oracle Cloud metadata (legacy address)
  'fd00:ec2::254/128', // AWS IMDS over IPv6
  'fd00:ec2::23/128', // AWS EKS Pod Identity agent over IPv6
  'fd20:ce::254/128', // Google Compute Engine metadata over IPv6
].map((cidr) => ipaddr.parseCIDR(cidr));

// ipaddr.js names the special-purpose ranges of the IANA registries; this maps each onto what
// it means for a webhook. A record over the declared union makes a new range a compile error.
const IPV4_CLASSES: Record<ReturnType<ipaddr.IPv4['range']>, AddressClass> = {
  unicast: 'public',
  private: 'private',
  carrierGradeNat: 'private', // 100.64/10 (RFC 6598): inside a provider's network
  loopback: 'loopback',
  linkLocal: 'link-local',
  unspecified: 'reserved', // 0.0.0.0/8: connecting to 0.0.0.0 reaches this host on Linux
  broadcast: 'reserved',
  multicast: 'reserved',
  reserved: 'reserved',
  benchmarking: 'reserved',
  amt: 'reserved',
  as112: 'reserved',
};

// ipaddr.js returns a few IPv6 range names its types leave out (deprecatedSiteLocal, discard,
// segmentRouting…); anything not listed here is 'reserved'.
const IPV6_CLASSES: Partial<Record<string, AddressClass>> = {
  unicast: 'public',
  uniqueLocal: 'private', // fc00::/7
  loopback: 'loopback',
  linkLocal: 'link-local',
};

const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96'); // RFC 6052: embeds an IPv4 address
const NAT64_LOCAL_USE = ipaddr.parseCIDR('64:ff9b:1::/48'); // RFC 8215: a network's own NAT64
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3'); // the only IPv6 space IANA allocates

/** Classifies an IPv4 or IPv6 address; anything unparseable counts as 'reserved' (refused). */
export function classifyAddress(ip: string): AddressClass {
  let address: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    address = ipaddr.parse(ip);
  } catch {
    return 'reserved';
  }
  if (address.kind() === 'ipv6') {
    const v6 = address as ipaddr.IPv6;
    // Addresses that carry an IPv4 address reach that address, so they are judged as it is:
    // ::ffff:127.0.0.1 is loopback, not an unremarkable IPv6 address.
    const embedded = embeddedIPv4(v6);
    if (embedded) return classifyParsed(embedded);
    if (v6.match(NAT64_LOCAL_USE)) return 'private';
  }
  return classifyParsed(address);
}

function classifyParsed(address: ipaddr.IPv4 | ipaddr.IPv6): AddressClass {
  if (METADATA_CIDRS.some(([range, bits]) => range.kind() === address.kind() && address.match(range, bits))) {
    return 'metadata';
  }
  // `?? 'reserved'` fails closed should a later ipaddr.js return a name its types do not list.
  if (address.kind() === 'ipv4') return IPV4_CLASSES[(address as ipaddr.IPv4).range()] ?? 'reserved';
  const v6 = address as ipaddr.IPv6;
  const known = IPV6_CLASSES[v6.range()] ?? 'reserved';
  // ipaddr.js calls everything it has no name for 'unicast', including unallocated space and
  // the deprecated IPv4-compatible ::a.b.c.d; only 2000::/3 is really public.
  return known === 'public' && !v6.match(GLOBAL_UNICAST) ? 'reserved' : known;
}

/** The IPv4 address inside an IPv4-mapped, IPv4-translated or well-known NAT64 address. */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | null {
  const range = address.range();
  if (range === 'ipv4Mapped' || range === 'rfc6145' || address.match(NAT64_WELL_KNOWN)) {
    const bytes = address.toByteArray().slice(12);
    return new ipaddr.IPv4(bytes);
  }
  return null;
}

/** Whether a webhook may be sent to `ip`: public always; private and loopback only if allowed. */
export function isAddressAllowed(ip: string, { allowPrivate }: GuardOptions): boolean {
  const kind = classifyAddress(ip);
  return kind === 'public' || (allowPrivate && (kind === 'private' || kind === 'loopback'));
}

const DESCRIPTIONS: Record<AddressClass, string> = {
  public: 'a public address',
  private: 'a private address',
  loopback: 'a loopback address',
  'link-local': 'a link-local address',
  metadata: 'a cloud metadata address',
  reserved: 'a reserved or non-routable address',
};

/**
 * The refusal for `ip`, or null when it is allowed; the message says what would change it. It
 * names the class of address, never the address: otherwise the webhook form would answer "what
 * does this internal name resolve to?" for anyone who may create a webhook (issue #11, finding 11).
 */
export function refusalFor(ip: string, options: GuardOptions): TargetRefusedError | null {
  if (isAddressAllowed(ip, options)) return null;
  const kind = classifyAddress(ip);
  const remedy =
    kind === 'private' || kind === 'loopback'
      ? 'set WEBHOOK_ALLOW_PRIVATE=true to allow private targets'
      : 'such targets are never allowed';
  return new TargetRefusedError(`target_url resolves to ${DESCRIPTIONS[kind]}; ${remedy}`);
}

/** The first refusal among resolved addresses; a name with no address at all is refused too. */
export function refusalForAll(hostname: string, addresses: readonly LookupAddress[], options: GuardOptions) {
  if (addresses.length === 0) return new TargetRefusedError(`target_url host ${hostname} has no address`);
  for (const { address } of addresses) {
    const refusal = refusalFor(address, options);
    if (refusal) return refusal;
  }
  return null;
}

/** The system resolver, every address of a name (what Node itself connects with). */
export const systemResolve: ResolveHost = (hostname) => dns.lookup(hostname, { all: true });

/** Options for `checkTargetUrl`. */
export interface CheckTargetOptions extends GuardOptions {
  /** Name resolution to use instead of the system's (for tests). */
  lookup?: ResolveHost;
}

/**
 * Resolves when `url` may receive webhooks: http(s), a host, no credentials, and every address
 * it resolves to allowed. Otherwise rejects with a `TargetRefusedError` fit for a 400 body.
 */
export async function checkTargetUrl(url: string, { allowPrivate, lookup = systemResolve }: CheckTargetOptions): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TargetRefusedError('target_url is not a valid absolute URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new TargetRefusedError(`target_url must use http or https, not ${parsed.protocol.slice(0, -1)}`);
  }
  // Credentials in the URL would be sent to the receiver and shown back in delivery logs.
  if (parsed.username !== '' || parsed.password !== '') {
    throw new TargetRefusedError('target_url must not contain a user name or password');
  }
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1'); // IPv6 literals come bracketed
  if (host === '') throw new TargetRefusedError('target_url must have a host');

  const options = { allowPrivate };
  if (isIP(host) !== 0) {
    const refusal = refusalFor(host, options);
    if (refusal) throw refusal;
    return;
  }
  let addresses: readonly LookupAddress[];
  try {
    addresses = await lookup(host);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | null)?.code ?? 'lookup failed';
    throw new TargetRefusedError(`target_url host ${host} could not be resolved (${code})`);
  }
  const refusal = refusalForAll(host, addresses, options);
  if (refusal) throw refusal;
}
