/**
 * What this process knows about recent password changes, so that credentials proven under an
 * old password stop working without a database read: access tokens carry the password time
 * they were issued under (`pwd`), cached Basic credentials the User they were verified as.
 *
 * A change made through this process (`UserStore.setPassword`) is noted at once. A change made
 * by another process is noted as soon as this one reads the user afresh (a full password check);
 * until then a Bearer token stays valid for at most its lifetime and a cached Basic credential
 * for at most the cache's TTL. Refresh tokens and sessions are rows, deleted with the change, so
 * they end at once everywhere (issue #3).
 *
 * Only changes younger than `horizonMs` (the longest a stale credential can live) are kept: a
 * credential issued before an older change has expired by itself, so the map stays small.
 */
export class PasswordChangeLog {
  private readonly changedAt = new Map<number, number>();

  constructor(
    private readonly horizonMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Notes a user's current password time (after a change here, or from a fresh read). */
  note(userId: number, passwordChangedAt: number): void {
    if (passwordChangedAt + this.horizonMs < this.now()) return;
    const known = this.changedAt.get(userId);
    if (known === undefined || known < passwordChangedAt) this.changedAt.set(userId, passwordChangedAt);
    if (this.changedAt.size > 1024) this.prune();
  }

  /** True when a credential issued under `passwordChangedAt` predates a change this process knows of. */
  isSuperseded(userId: number, passwordChangedAt: number): boolean {
    const known = this.changedAt.get(userId);
    return known !== undefined && passwordChangedAt < known;
  }

  private prune(): void {
    const oldest = this.now() - this.horizonMs;
    for (const [userId, at] of this.changedAt) if (at < oldest) this.changedAt.delete(userId);
  }
}
