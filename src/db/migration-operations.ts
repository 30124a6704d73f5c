// The steps a migration file records (RESOURCES.md §5), as plain JSON-serialisable data: how each
// changes a SchemaState (`applyOperation`, `replay`), how it reads to a reviewer
// (`describeOperation`), and the autodetector that finds the steps between two states
// (`diffStates`, after Django's `MigrationAutodetector`). Pure: no I/O, no SQL — the SQL for each
// step is the schema editors' business (`schema-editor/`).

import { columnOf, indexColumnOf, type CollectionState, type FieldState, type SchemaState } from './schema-state.js';

export type Operation =
  | {
      readonly op: 'createCollection';
      readonly collection: string;
      readonly owner: boolean;
      readonly timestamps: boolean;
      readonly fields: Readonly<Record<string, FieldState>>;
      readonly indexes: readonly string[];
    }
  | { readonly op: 'removeCollection'; readonly collection: string }
  | { readonly op: 'addField'; readonly collection: string; readonly field: string; readonly state: FieldState }
  | { readonly op: 'removeField'; readonly collection: string; readonly field: string }
  | { readonly op: 'alterField'; readonly collection: string; readonly field: string; readonly state: FieldState }
  | { readonly op: 'renameField'; readonly collection: string; readonly from: string; readonly to: string }
  | { readonly op: 'alterCollection'; readonly collection: string; readonly owner: boolean; readonly timestamps: boolean }
  | { readonly op: 'addIndex' | 'removeIndex'; readonly collection: string; readonly field: string };

export type OperationName = Operation['op'];

/** An operation that does not fit the state it is applied to (a hand-edited or reordered file). */
export class InvalidOperationError extends Error {
  override name = 'InvalidOperationError';
}

/** A `--rename` that names a field the migrations or the declarations do not have. */
export class InvalidRenameError extends Error {
  override name = 'InvalidRenameError';
}

export interface FieldRename {
  readonly collection: string;
  readonly from: string;
  readonly to: string;
}

/** The state after `op`; throws InvalidOperationError when `op` does not fit `state`. */
export function applyOperation(state: SchemaState, op: Operation): SchemaState {
  const fail = (problem: string): never => {
    throw new InvalidOperationError(`${describeOperation(op)}: ${problem}`);
  };
  if (op.op === 'createCollection') {
    if (state[op.collection]) fail(`collection ${op.collection} already exists`);
    const created: CollectionState = {
      owner: op.owner,
      timestamps: op.timestamps,
      fields: { ...op.fields },
      indexes: sortedUnique(op.indexes),
    };
    const next = { ...state, [op.collection]: created };
    for (const [name, field] of Object.entries(op.fields)) checkField(next, op.collection, name, field, fail);
    checkColumnsDistinct(op.collection, created, fail);
    for (const entry of created.indexes) checkIndexable(op.collection, created, entry, fail);
    return next;
  }

  const collection = state[op.collection] ?? fail(`there is no collection ${op.collection}`);
  const withCollection = (changed: CollectionState): SchemaState => ({ ...state, [op.collection]: changed });

  switch (op.op) {
    case 'removeCollection': {
      for (const [name, other] of Object.entries(state)) {
        if (name === op.collection) continue;
        for (const [fieldName, field] of Object.entries(other.fields)) {
          if (field.to === op.collection) fail(`${name}.${fieldName} still refers to it`);
        }
      }
      const { [op.collection]: _removed, ...rest } = state;
      return rest;
    }
    case 'addField': {
      if (collection.fields[op.field]) fail(`field ${op.collection}.${op.field} already exists`);
      const changed = { ...collection, fields: { ...collection.fields, [op.field]: op.state } };
      checkField(withCollection(changed), op.collection, op.field, op.state, fail);
      checkColumnsDistinct(op.collection, changed, fail);
      return withCollection(changed);
    }
    case 'removeField': {
      if (!collection.fields[op.field]) fail(`there is no field ${op.collection}.${op.field}`);
      if (collection.indexes.includes(op.field)) fail(`its index must be removed first`);
      const { [op.field]: _removed, ...fields } = collection.fields;
      return withCollection({ ...collection, fields });
    }
    case 'alterField': {
      const before = collection.fields[op.field] ?? fail(`there is no field ${op.collection}.${op.field}`);
      if (!sameStorageKind(before, op.state)) {
        fail(`a ${before.type} field cannot become a ${op.state.type} field in place; remove it and add it anew`);
      }
      const changed = { ...collection, fields: { ...collection.fields, [op.field]: op.state } };
      checkField(withCollection(changed), op.collection, op.field, op.state, fail);
      return withCollection(changed);
    }
    case 'renameField': {
      if (!collection.fields[op.from]) fail(`there is no field ${op.collection}.${op.from}`);
      if (collection.fields[op.to]) fail(`field ${op.collection}.${op.to} already exists`);
      // Rebuilt key by key so the renamed field keeps its place (columns are created in this order).
      const fields = Object.fromEntries(
        Object.entries(collection.fields).map(([name, field]) => [name === op.from ? op.to : name, field]),
      );
      const indexes = sortedUnique(collection.indexes.map((entry) => (entry === op.from ? op.to : entry)));
      const changed = { ...collection, fields, indexes };
      checkColumnsDistinct(op.collection, changed, fail);
      return withCollection(changed);
    }
    case 'alterCollection': {
      const changed = { ...collection, owner: op.owner, timestamps: op.timestamps };
      checkColumnsDistinct(op.collection, changed, fail);
      for (const entry of changed.indexes) {
        if (indexColumnOf(changed, entry) === null) fail(`its index on ${entry} must be removed first`);
      }
      return withCollection(changed);
    }
    case 'addIndex': {
      if (collection.indexes.includes(op.field)) fail(`${op.collection} already has an index on ${op.field}`);
      checkIndexable(op.collection, collection, op.field, fail);
      return withCollection({ ...collection, indexes: sortedUnique([...collection.indexes, op.field]) });
    }
    case 'removeIndex': {
      if (!collection.indexes.includes(op.field)) fail(`${op.collection} has no index on ${op.field}`);
      return withCollection({ ...collection, indexes: collection.indexes.filter((entry) => entry !== op.field) });
    }
  }
}

/** The state that `operations`, applied in order to `initial`, describe. */
export function replay(operations: readonly Operation[], initial: SchemaState = {}): SchemaState {
  return operations.reduce(applyOperation, initial);
}

/** One line for a reviewer or `migrate --plan`, e.g. "Remove field books.isbn (data loss)". */
export function describeOperation(op: Operation): string {
  switch (op.op) {
    case 'createCollection': {
      const count = Object.keys(op.fields).length;
      return `Create collection ${op.collection} (${count} field${count === 1 ? '' : 's'})`;
    }
    case 'removeCollection':
      return `Remove collection ${op.collection} (data loss)`;
    case 'addField':
      return `Add field ${op.collection}.${op.field}`;
    case 'removeField':
      return `Remove field ${op.collection}.${op.field} (data loss)`;
    case 'alterField':
      return `Alter field ${op.collection}.${op.field}`;
    case 'renameField':
      return `Rename field ${op.collection}.${op.from} to ${op.collection}.${op.to}`;
    case 'alterCollection':
      return `Alter collection ${op.collection} (owner: ${op.owner ? 'yes' : 'no'}, timestamps: ${op.timestamps ? 'yes' : 'no'})`;
    case 'addIndex':
      return `Add index on ${op.collection}.${op.field}`;
    case 'removeIndex':
      return `Remove index on ${op.collection}.${op.field}`;
  }
}

/**
 * The operations that turn `from` (what the migration files describe) into `to` (what the
 * declarations ask for). A rename is never guessed (RESOURCES.md §7): without one in `renames`, a
 * renamed field is a removed field plus a new one. The order is fixed, so the same two states
 * always give the same file, and safe to apply: renames; index removals; new collections, each
 * after the collections it refers to; owner/timestamps changes; field removals, additions and
 * changes; index additions; removed collections, each before the collections it referred to.
 */
export function diffStates(
  from: SchemaState,
  to: SchemaState,
  { renames = [] }: { renames?: readonly FieldRename[] } = {},
): Operation[] {
  const operations: Operation[] = [];
  let current = from;
  const emit = (op: Operation) => {
    current = applyOperation(current, op);
    operations.push(op);
  };

  for (const rename of renames) emit(checkedRename(current, to, rename));

  const kept = Object.keys(to)
    .filter((name) => current[name])
    .sort();
  for (const name of kept) {
    const wanted = new Set(to[name]!.indexes);
    const was = current[name]!;
    for (const entry of was.indexes) {
      const field = was.fields[entry];
      const next = to[name]!.fields[entry];
      // A field stored anew (removed and added) loses its index with its column; re-added below.
      const restored = field !== undefined && next !== undefined && !sameStorageKind(field, next);
      if (!wanted.has(entry) || restored) emit({ op: 'removeIndex', collection: name, field: entry });
    }
  }

  const created = creationOrder(to, Object.keys(to).filter((name) => !current[name]));
  // A reference to a collection created later (a cycle) is added once that collection exists.
  const deferredFields: Operation[] = [];
  const deferredIndexes: Operation[] = [];
  for (const name of created) {
    const collection = to[name]!;
    const fields: Record<string, FieldState> = {};
    for (const [fieldName, field] of Object.entries(collection.fields)) {
      if (field.to !== undefined && field.to !== name && !exists(current, field.to) && !isCreatedBefore(created, field.to, name)) {
        deferredFields.push({ op: 'addField', collection: name, field: fieldName, state: field });
      } else {
        fields[fieldName] = field;
      }
    }
    const deferred = (entry: string) => collection.fields[entry] !== undefined && fields[entry] === undefined;
    for (const entry of collection.indexes.filter(deferred)) {
      deferredIndexes.push({ op: 'addIndex', collection: name, field: entry });
    }
    emit({
      op: 'createCollection',
      collection: name,
      owner: collection.owner,
      timestamps: collection.timestamps,
      fields,
      indexes: collection.indexes.filter((entry) => !deferred(entry)),
    });
  }
  deferredFields.forEach(emit);
  deferredIndexes.forEach(emit);

  for (const name of kept) {
    const was = current[name]!;
    const wanted = to[name]!;
    if (was.owner !== wanted.owner || was.timestamps !== wanted.timestamps) {
      emit({ op: 'alterCollection', collection: name, owner: wanted.owner, timestamps: wanted.timestamps });
    }
  }

  for (const name of kept) {
    const was = current[name]!.fields;
    const wanted = to[name]!.fields;
    for (const field of Object.keys(was)) {
      const next = wanted[field];
      if (!next || !sameStorageKind(was[field]!, next)) emit({ op: 'removeField', collection: name, field });
    }
    for (const [field, state] of Object.entries(wanted)) {
      const previous = current[name]!.fields[field];
      if (!previous) emit({ op: 'addField', collection: name, field, state });
      else if (!sameField(previous, state)) emit({ op: 'alterField', collection: name, field, state });
    }
  }

  for (const name of kept) {
    const have = new Set(current[name]!.indexes);
    for (const entry of to[name]!.indexes) {
      if (!have.has(entry)) emit({ op: 'addIndex', collection: name, field: entry });
    }
  }

  const removed = creationOrder(current, Object.keys(current).filter((name) => !to[name])).reverse();
  for (const name of removed) {
    // Fields of other removed collections that refer to this one go first, so it can go.
    for (const other of removed) {
      if (other === name || !current[other]) continue;
      for (const [field, state] of Object.entries(current[other]!.fields)) {
        if (state.to === name) {
          for (const entry of current[other]!.indexes.filter((e) => e === field)) {
            emit({ op: 'removeIndex', collection: other, field: entry });
          }
          emit({ op: 'removeField', collection: other, field });
        }
      }
    }
    emit({ op: 'removeCollection', collection: name });
  }
  return operations;
}

/** Whether two field states are the same, ignoring keys that are present but undefined. */
export function sameField(a: FieldState, b: FieldState): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]) as Set<keyof FieldState>;
  for (const key of keys) if (a[key] !== b[key]) return false;
  return true;
}

/** A field can change in place only while it stays a column, a reference column or a join table. */
function sameStorageKind(a: FieldState, b: FieldState): boolean {
  const kind = (field: FieldState) => (field.type === 'references' ? 'join' : field.type === 'reference' ? 'ref' : 'column');
  return kind(a) === kind(b);
}

function checkedRename(current: SchemaState, to: SchemaState, rename: FieldRename): Operation {
  const flag = `--rename ${rename.collection}.${rename.from}:${rename.to}`;
  const was = current[rename.collection];
  const wanted = to[rename.collection];
  if (!was) throw new InvalidRenameError(`${flag}: the migrations have no collection ${rename.collection}`);
  if (!wanted) throw new InvalidRenameError(`${flag}: no collection ${rename.collection} is declared`);
  if (!was.fields[rename.from]) {
    throw new InvalidRenameError(`${flag}: the migrations have no field ${rename.collection}.${rename.from}`);
  }
  if (!wanted.fields[rename.to]) {
    throw new InvalidRenameError(`${flag}: no field ${rename.collection}.${rename.to} is declared`);
  }
  if (wanted.fields[rename.from]) {
    throw new InvalidRenameError(`${flag}: ${rename.collection}.${rename.from} is still declared`);
  }
  return { op: 'renameField', collection: rename.collection, from: rename.from, to: rename.to };
}

/**
 * Whether a reference's target exists: a collection of the state, or `users`, restwire's own table,
 * which restwire's migrations create before any of the user's (ACCESS.md §7: `team_lead=@me`).
 */
function exists(state: SchemaState, target: string): boolean {
  return state[target] !== undefined || target === 'users';
}

/** `names` sorted so that each comes after the collections of `state` it refers to (cycles broken by name). */
function creationOrder(state: SchemaState, names: readonly string[]): string[] {
  const pending = new Set(names);
  const ordered: string[] = [];
  const visiting = new Set<string>();
  const visit = (name: string) => {
    if (!pending.has(name) || visiting.has(name)) return;
    visiting.add(name);
    const targets = Object.values(state[name]!.fields)
      .map((field) => field.to)
      .filter((target): target is string => target !== undefined && target !== name);
    for (const target of [...new Set(targets)].sort()) visit(target);
    pending.delete(name);
    ordered.push(name);
  };
  for (const name of [...names].sort()) visit(name);
  return ordered;
}

function isCreatedBefore(order: readonly string[], target: string, name: string): boolean {
  const at = order.indexOf(target);
  return at !== -1 && at < order.indexOf(name);
}

function checkField(state: SchemaState, collection: string, name: string, field: FieldState, fail: (problem: string) => never) {
  if (field.type === 'reference' || field.type === 'references') {
    if (field.to === undefined) fail(`${collection}.${name} names no target collection`);
    if (!exists(state, field.to)) fail(`${collection}.${name} refers to ${field.to}, which does not exist yet`);
  }
}

const RESERVED_COLUMNS = ['id'];

/** Two fields (or a field and `id`/`owner_id`/timestamps) must not share a column. */
function checkColumnsDistinct(name: string, collection: CollectionState, fail: (problem: string) => never) {
  const seen = new Set(RESERVED_COLUMNS);
  if (collection.owner) seen.add('owner_id');
  if (collection.timestamps) ['created_at', 'updated_at'].forEach((column) => seen.add(column));
  for (const [fieldName, field] of Object.entries(collection.fields)) {
    const column = columnOf(fieldName, field);
    if (column === null) continue;
    if (seen.has(column)) fail(`${name}.${fieldName} would be stored in column ${column}, which is taken`);
    seen.add(column);
  }
}

function checkIndexable(name: string, collection: CollectionState, entry: string, fail: (problem: string) => never) {
  if (indexColumnOf(collection, entry) === null) {
    fail(`${name}.${entry} is not a column that can be indexed`);
  }
}

function sortedUnique(entries: readonly string[]): string[] {
  return [...new Set(entries)].sort();
}
