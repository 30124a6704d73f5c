/** The authenticated caller. Anonymous callers have no User at all (SEED.md §5 rule 3). */
export interface User {
  readonly id: number;
  readonly username: string;
  /** Changes with the password; caches and refresh tokens issued before it are void. */
  readonly passwordChangedAt: number;
}

/** How the caller proved who they are. */
export type AuthScheme = 'basic' | 'bearer' | 'session';

export interface Identity {
  readonly user: User;
  readonly scheme: AuthScheme;
}
