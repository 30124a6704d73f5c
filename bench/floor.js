// The floor of restwire's own stack (issue #13): bare Fastify doing the database work restwire
// does for the benchmark's requests, with the same driver, and nothing else — no auth, no rate
// limits, no ETag, no validation, no cache. Its requests/s is what restwire could reach on this
// database if everything it adds cost nothing.
//
// - SQLite (FLOOR_SQLITE_FILE): better-sqlite3 in WAL mode with synchronous=NORMAL and the
//   pragmas restwire sets (src/db/database.ts), prepared statements; one autocommit INSERT …
//   RETURNING per create (restwire shares commits between creates: group commit).
// - PostgreSQL (FLOOR_DATABASE_URL, a fresh database): pg with a pool of 10 like restwire's,
//   one pooled query per read and one INSERT … RETURNING per create, as unnamed statements
//   (what Kysely's PostgresDialect sends).
//
// The table is restwire's `experiences` (src/db/migrations.ts): same columns, the foreign key to
// users and the three ordering indexes, so an insert maintains what restwire's does. Answers
// restwire's JSON shapes (API.md §2): GET one = SELECT by id; a page = keyset SELECT … ORDER BY
// id DESC LIMIT n+1 (the extra row tells whether there is a next page); POST = 201 + Location.
//
// Run as a child of bench/run.js: HOST/PORT from the environment (PORT=0 picks a free port);
// seeds FLOOR_SEED records, then prints "Server listening at http://HOST:PORT"; exits on SIGTERM.
import Fastify from 'fastify';

const SEED = Number(process.env.FLOOR_SEED ?? 150);
const OWNER = 1;
const COLUMNS = 'id, title, q_like_dislike, owner_id, created_at, updated_at';

/** An experience row as restwire renders it (API.md §2). */
function render(row) {
  return {
    url: `/api/v1/experiences/${row.id}/`,
    id: row.id,
    title: row.title,
    q_like_dislike: row.q_like_dislike,
    owner: `/api/v1/users/${row.owner_id}/`,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
  };
}

/** A cursor of the same shape as restwire's keyset cursor (base64url JSON), without its MAC. */
const encodeCursor = (id) => Buffer.from(JSON.stringify(['-id', id, id, 0])).toString('base64url');

function decodeCursor(text) {
  try {
    const value = JSON.parse(Buffer.from(String(text).split('.')[0], 'base64url').toString());
    return Number.isSafeInteger(value?.[1]) ? value[1] : null;
  } catch {
    return null;
  }
}

/**
 * The few statements the routes need, on SQLite: each a function returning rows (or a row).
 * Prepared once; better-sqlite3 runs them synchronously on this thread, as restwire's does.
 */
async function sqliteStore(file) {
  const { default: SQLite } = await import('better-sqlite3');
  const db = new SQLite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  db.exec(`
    create table if not exists users (id integer primary key autoincrement, username varchar(150) not null unique);
    create table if not exists experiences (
      id integer primary key autoincrement,
      title text not null,
      q_like_dislike text not null,
      owner_id bigint not null references users (id),
      created_at bigint not null,
      updated_at bigint not null
    );
    create index if not exists experiences_owner on experiences (owner_id, id);
    create index if not exists experiences_created on experiences (created_at, id);
    create index if not exists experiences_title on experiences (title, id);
    insert or ignore into users (id, username) values (${OWNER}, 'bench-admin');
  `);
  const one = db.prepare(`select ${COLUMNS} from experiences where id = ?`);
  const first = db.prepare(`select ${COLUMNS} from experiences order by id desc limit ?`);
  const after = db.prepare(`select ${COLUMNS} from experiences where id < ? order by id desc limit ?`);
  const insert = db.prepare(
    `insert into experiences (title, q_like_dislike, owner_id, created_at, updated_at) values (?, ?, ?, ?, ?) returning ${COLUMNS}`,
  );
  return {
    one: async (id) => one.get(id),
    page: async (before, limit) => (before === null ? first.all(limit) : after.all(before, limit)),
    create: async (title, text, at) => insert.get(title, text, OWNER, at, at),
    close: async () => db.close(),
  };
}

/** The same statements on PostgreSQL, one pooled query each. */
async function postgresStore(connectionString) {
  const { default: pg } = await import('pg');
  // As restwire does: int8 ids and millisecond timestamps as numbers, not strings.
  pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));
  const pool = new pg.Pool({ connectionString, max: 10 });
  pool.on('error', () => {});
  await pool.query(`
    create table if not exists users (id bigserial primary key, username varchar(150) not null unique);
    create table if not exists experiences (
      id bigserial primary key,
      title text not null,
      q_like_dislike text not null,
      owner_id bigint not null references users (id),
      created_at bigint not null,
      updated_at bigint not null
    );
    create index if not exists experiences_owner on experiences (owner_id, id);
    create index if not exists experiences_created on experiences (created_at, id);
    create index if not exists experiences_title on experiences (title, id);
    insert into users (id, username) values (${OWNER}, 'bench-admin') on conflict do nothing;
  `);
  const rows = async (text, values) => (await pool.query(text, values)).rows;
  return {
    one: async (id) => (await rows(`select ${COLUMNS} from experiences where id = $1`, [id]))[0],
    page: (before, limit) =>
      before === null
        ? rows(`select ${COLUMNS} from experiences order by id desc limit $1`, [limit])
        : rows(`select ${COLUMNS} from experiences where id < $1 order by id desc limit $2`, [before, limit]),
    create: async (title, text, at) =>
      (await rows(
        `insert into experiences (title, q_like_dislike, owner_id, created_at, updated_at) values ($1, $2, $3, $4, $4) returning ${COLUMNS}`,
        [title, text, OWNER, at],
      ))[0],
    close: () => pool.end(),
  };
}

const store = process.env.FLOOR_DATABASE_URL
  ? await postgresStore(process.env.FLOOR_DATABASE_URL)
  : await sqliteStore(process.env.FLOOR_SQLITE_FILE ?? ':memory:');

// Seeded as restwire is by bench/restwire.js: one create per record, so ids run 1…SEED.
for (let n = 1; n <= SEED; n++) await store.create(`Seed experience ${n}`, `Seeded record ${n}.`, Date.now());

const app = Fastify({ logger: false });

app.get('/api/v1/experiences/:id/', async (request, reply) => {
  const id = Number(request.params.id);
  const row = Number.isSafeInteger(id) ? await store.one(id) : undefined;
  if (!row) return reply.code(404).send({ detail: 'Not found.' });
  return render(row);
});

app.get('/api/v1/experiences/', async (request, reply) => {
  const limit = Math.min(Math.max(Number(request.query.limit ?? 20) || 20, 1), 100);
  const before = request.query.cursor === undefined ? null : decodeCursor(request.query.cursor);
  const rows = await store.page(before, limit + 1);
  const results = rows.slice(0, limit).map(render);
  const next = rows.length > limit ? `/api/v1/experiences/?limit=${limit}&cursor=${encodeCursor(results.at(-1).id)}` : null;
  if (next) reply.header('link', `<${next}>; rel="next"`);
  return { next, previous: null, results };
});

app.post('/api/v1/experiences/', async (request, reply) => {
  const body = request.body ?? {};
  const row = await store.create(String(body.title ?? ''), String(body.q_like_dislike ?? ''), Date.now());
  const created = render(row);
  return reply.code(201).header('location', created.url).send(created);
});

const address = await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) });
process.stdout.write(`Server listening at ${address}\n`);

const stop = () => void app.close().then(() => store.close()).then(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
