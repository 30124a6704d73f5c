import { randomBytes } from 'node:crypto';
import type { Config } from '../config.js';
import { UsernameTaken, type UserStore } from '../auth/users.js';
import { ADMIN_ROLE } from '../http/caller.js';

/**
 * On a first start with no users, creates ADMIN_USERNAME/ADMIN_PASSWORD, or `admin` with a random
 * password printed once (API.md §0), with the `admin` role (ACCESS.md §1). Returns the line to print, or null when nothing was created.
 */
export async function ensureFirstUser(users: UserStore, config: Config): Promise<string | null> {
  if ((await users.count()) > 0) return null;
  const username = config.adminUsername ?? 'admin';
  const password = config.adminPassword ?? randomBytes(12).toString('base64url');
  try {
    await users.create(username, password, [ADMIN_ROLE]);
  } catch (error) {
    // Another process created it first; that one prints the password.
    if (error instanceof UsernameTaken) return null;
    throw error;
  }
  return config.adminPassword
    ? `restwire: created user "${username}" from ADMIN_USERNAME/ADMIN_PASSWORD`
    : `restwire: created user "${username}" with password ${password} (shown once; change it with: restwire setpassword ${username} --password-stdin)`;
}
