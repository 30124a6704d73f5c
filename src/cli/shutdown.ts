/**
 * Runs `stop` once, on the first SIGTERM or SIGINT (or a call of the returned function), then
 * exits: 0 for a signal (API.md §5: SIGTERM drains and exits 0), or the code given to the call.
 * Signals that arrive while stopping are ignored.
 */
export function onShutdownSignal(stop: (signal: NodeJS.Signals) => Promise<void>): (signal: NodeJS.Signals, exitCode: number) => void {
  let stopping = false;
  const shutdown = (signal: NodeJS.Signals, exitCode: number) => {
    if (stopping) return;
    stopping = true;
    void stop(signal).then(() => process.exit(exitCode));
  };
  process.on('SIGTERM', () => shutdown('SIGTERM', 0));
  process.on('SIGINT', () => shutdown('SIGINT', 0));
  return shutdown;
}
