import { isIP, type LookupFunction } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { refusalFor, refusalForAll, systemResolve, type GuardOptions, type ResolveHost } from './address-guard.js';

// The send-time half of the SSRF guard (address-guard.ts has the rules and the creation-time
// check). Only the dispatcher loads this module, on its first delivery: undici is a tenth of an
// idle process's memory, and a process that never delivers need not carry it (issue #6).

/** Options for `createGuardedAgent`. */
export interface GuardedAgentOptions extends GuardOptions {
  /** Time allowed to establish a connection, in milliseconds (default 10 000). */
  connectTimeoutMs?: number;
  /** Name resolution to use instead of the system's (for tests). */
  lookup?: ResolveHost;
}

/**
 * An undici Agent that checks every address at connect time, after its own DNS resolution, so
 * a name that resolved to a public address at creation cannot be re-pointed inside (DNS rebinding).
 */
export function createGuardedAgent({
  allowPrivate,
  connectTimeoutMs = 10_000,
  lookup = systemResolve,
}: GuardedAgentOptions): Agent {
  const options = { allowPrivate };

  const guardedLookup: LookupFunction = function guardedLookup(hostname, lookupOptions, callback) {
    const family = lookupOptions.family === 'IPv4' ? 4 : lookupOptions.family === 'IPv6' ? 6 : lookupOptions.family;
    lookup(hostname).then(
      (all) => {
        const addresses = family === 4 || family === 6 ? all.filter((a) => a.family === family) : [...all];
        const refusal = refusalForAll(hostname, addresses, options);
        const [first] = addresses;
        if (refusal || !first) callback(refusal, '');
        // Node asks for every address when it races IPv4 and IPv6 (autoSelectFamily), else one.
        else if (lookupOptions.all) callback(null, addresses);
        else callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ''),
    );
  };

  const connectSocket = buildConnector({ timeout: connectTimeoutMs, lookup: guardedLookup });
  return new Agent({
    // Node never calls `lookup` for an IP literal, so literals are checked here before connecting.
    connect: function guardedConnect(connectOptions, callback) {
      if (isIP(connectOptions.hostname) !== 0) {
        const refusal = refusalFor(connectOptions.hostname, options);
        if (refusal) {
          callback(refusal, null);
          return;
        }
      }
      connectSocket(connectOptions, callback);
    },
  });
}
