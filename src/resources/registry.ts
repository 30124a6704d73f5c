// The registry of collections: the one list that drives routes, the API root, OpenAPI, webhook
// events, related lists and migrations (RESOURCES.md §1). Built from the declarations of the
// resources folder (or, without one, the seed's `experiences`), plus restwire's own `users`.
// Whatever needs every collection at once is checked here: reference targets, reverse lists,
// duplicate names and event names. Errors name the file, the collection and the field.

import { joinTableOf, type CollectionState, type FieldState, type SchemaState } from '../db/schema-state.js';
import { experiences } from './experiences.js';
import { DeclarationError, type Resource } from './resource.js';
import { usersOwning } from './users.js';

/** restwire's own tables (db/migrations.ts, and Kysely's and the user migrator's bookkeeping). */
const OWN_TABLES = [
  'users', 'experiences', 'settings', 'sessions', 'refresh_tokens', 'webhooks', 'deliveries',
  'kysely_migration', 'kysely_migration_lock', 'restwire_user_migration', 'restwire_user_migration_lock',
];

/** A declaration and the file it came from (none for restwire's own). */
export interface LoadedDeclaration {
  readonly resource: Resource;
  readonly file: string | null;
}

export interface Registry {
  /** The declared collections (or, with no folder, `experiences`), in declaration order: what the API root lists first. app.ts serves them with `users`, the webhooks and their deliveries. */
  readonly collections: readonly Resource[];
  /** `users`, with a reverse list per owned collection. */
  readonly users: Resource;
  /** Event names a webhook may subscribe to, besides `*`. */
  readonly eventNames: readonly string[];
  /** The declared collection or `users` with this name (what a reference may name). */
  find(name: string): Resource | undefined;
}

/** A declaration error with the file it is in. */
export class RegistryError extends Error {
  constructor(file: string | null, error: DeclarationError | string) {
    super(`${file ? `${file}: ` : ''}${error instanceof DeclarationError ? error.message : error}`);
    this.name = 'RegistryError';
  }
}

/** Checks the declarations together and builds the registry; without declarations, `experiences` is served. */
export function buildRegistry(declared: readonly LoadedDeclaration[] | null): Registry {
  const loaded = declared ?? [{ resource: experiences, file: null }];
  const byName = new Map<string, LoadedDeclaration>();
  const byEvent = new Map<string, LoadedDeclaration>();
  for (const entry of loaded) {
    const { resource, file } = entry;
    const twin = byName.get(resource.name);
    if (twin) throw new RegistryError(file, new DeclarationError(resource.name, null, `declared twice (also in ${twin.file ?? 'restwire'})`));
    byName.set(resource.name, entry);
    if (resource.event) {
      const other = byEvent.get(resource.event);
      if (other) {
        throw new RegistryError(file, new DeclarationError(resource.name, null, `event "${resource.event}" is also the event of "${other.resource.name}" (${other.file ?? 'restwire'})`));
      }
      byEvent.set(resource.event, entry);
    }
  }
  // Tables restwire keeps for itself, and every join table: a collection may not take their names.
  const taken = new Map<string, string>(OWN_TABLES.map((name) => [name, 'restwire']));
  for (const { resource } of loaded) {
    for (const [field, declared] of Object.entries(resource.fields)) {
      if (declared.type === 'references') taken.set(joinTableOf(resource.table, field), `the join table of ${resource.name}.${field}`);
    }
  }
  const eventIds = new Map<number, LoadedDeclaration>();
  for (const entry of loaded) {
    const { resource, file } = entry;
    const holder = taken.get(resource.table);
    if (holder && !resource.builtin) {
      throw new RegistryError(file, new DeclarationError(resource.name, null, `the table "${resource.table}" is already ${holder === 'restwire' ? "one of restwire's own" : holder}; choose another name`));
    }
    if (resource.eventId !== undefined) {
      const other = eventIds.get(resource.eventId);
      if (other) throw new RegistryError(file, new DeclarationError(resource.name, null, `eventId ${resource.eventId} is also the eventId of "${other.resource.name}"`));
      eventIds.set(resource.eventId, entry);
    }
    // An owner is the user who created the record: there is none for an anonymous create.
    if (resource.owner && resource.operations.includes('create') && resource.permission.hasPermission({ method: 'POST', user: null })) {
      throw new RegistryError(file, new DeclarationError(resource.name, null, 'owner: true needs a permission that refuses anonymous creates (e.g. permission.authenticatedOrReadOnly)'));
    }
  }
  const collections = loaded.map((entry) => entry.resource);
  const users = usersOwning(collections);
  const all = [...collections, users];
  const find = (name: string) => all.find((resource) => resource.name === name);

  for (const { resource, file } of loaded) {
    const fail = (field: string, problem: string): never => {
      throw new RegistryError(file, new DeclarationError(resource.name, field, problem));
    };
    for (const [name, field] of Object.entries(resource.fields)) {
      if (field.to !== undefined && !find(field.to)) fail(name, `refers to "${field.to}", which no declaration names`);
    }
    for (const [name, relation] of Object.entries(resource.related)) {
      const source = find(relation.collection);
      if (!source) fail(name, `the related list names "${relation.collection}", which no declaration names`);
      const field = Object.hasOwn(source!.fields, relation.field) ? source!.fields[relation.field] : undefined;
      const refersHere = relation.field === 'owner' ? source!.owner && resource.name === 'users' : field?.to === resource.name;
      if (!refersHere) fail(name, `"${relation.collection}.${relation.field}" is not a reference to ${resource.name}`);
    }
  }
  return { collections, users, eventNames: [...byEvent.keys()], find };
}

/** What the declared collections ask of the database (the user's migrations must describe this). */
export function declaredState(registry: Registry): SchemaState {
  const state: Record<string, CollectionState> = {};
  for (const resource of registry.collections) {
    if (resource.builtin) continue;
    const fields: Record<string, FieldState> = {};
    for (const [name, field] of Object.entries(resource.fields)) fields[name] = field.state();
    const indexes = new Set<string>();
    // A references filter reads the join table, whose to_id index serves it.
    for (const name of [...resource.orderings, ...Object.keys(resource.filters)]) {
      if (name !== 'id' && resource.fields[name]?.type !== 'references') indexes.add(name);
    }
    // Reverse lists and delete rules look records up by their reference.
    for (const [name, field] of Object.entries(resource.fields)) if (field.type === 'reference') indexes.add(name);
    if (resource.owner) indexes.add('owner');
    state[resource.name] = { owner: resource.owner, timestamps: resource.timestamps, fields, indexes: [...indexes].sort() };
  }
  return state;
}
