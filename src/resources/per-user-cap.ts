// A per-user cap on a collection's records (API.md §4: 20 webhooks; ACCESS.md §5: 50 API keys),
// checked in the create's transaction by the declarations' `beforeCreate` hooks.

import type { Storage } from '../db/database.js';
import type { DynamicDb } from '../db/dynamic-tables.js';
import { ValidationError } from '../http/errors.js';

/** Refuses (400) a create that would give the user more than `max` rows of `table`. */
export async function refuseBeyondPerUserCap(storage: Storage, trx: DynamicDb, cap: { table: string; userId: number; max: number; message: string }): Promise<void> {
  // One user's creations take turns (the user's row locked), so the cap holds under concurrency.
  await storage.lockForUpdate(trx.selectFrom('users').select('id').where('id', '=', cap.userId)).execute();
  const { n } = (await trx
    .selectFrom(cap.table)
    .select((eb) => eb.fn.countAll().as('n'))
    .where('owner_id', '=', cap.userId)
    .executeTakeFirstOrThrow()) as { n: number | string };
  if (Number(n) >= cap.max) throw new ValidationError({ non_field_errors: [cap.message] });
}
