// `/api/v1/docs/` (API.md §5): the OpenAPI document as a browsable page, drawn inside the shared
// layout and styled by its one stylesheet (`.docs` in assets/browsable.css). Every path,
// operation and schema is written out as escaped HTML: the page needs no script to be read.
// Built with `escapeHtml` rather than ghtml's `html`: descriptions are escaped first and their
// backquoted spans then become <code> (`prose`), so most cells are markup built here.

import {
  OPERATION_METHODS,
  type OpenApiDocument,
  type OperationObject,
  type ParameterObject,
  type Reference,
  type ResponseObject,
  type SchemaObject,
} from './types.js';
import { escapeHtml } from '../../http/renderers.js';
import type { PageTemplate } from '../../http/view.js';

const isRef = (value: object): value is Reference => '$ref' in value;
/** `#/components/schemas/Experience` → `Experience`. */
const refName = (ref: string) => ref.slice(ref.lastIndexOf('/') + 1);
/** `#/components/schemas/Experience` → `schemas-Experience`, the anchor of its section below. */
const anchor = (ref: string) => ref.replace('#/components/', '').replace(/\W/g, '-');
const code = (text: string) => `<code>${escapeHtml(text)}</code>`;

/** `1–200`, `≥ 1`, `≤ 100`, or nothing. */
function range(low: unknown, high: unknown): string {
  if (low !== undefined && high !== undefined) return escapeHtml(`${String(low)}–${String(high)}`);
  if (low !== undefined) return escapeHtml(`≥ ${String(low)}`);
  if (high !== undefined) return escapeHtml(`≤ ${String(high)}`);
  return '';
}

/** One line describing a schema: its type, constraints and a link for a reference. */
function schemaSummary(schema: SchemaObject): string {
  if (typeof schema.$ref === 'string') return `<a href="#${anchor(schema.$ref)}">${escapeHtml(refName(schema.$ref))}</a>`;
  const parts: string[] = [];
  const type = Array.isArray(schema.type) ? schema.type.join(' or ') : typeof schema.type === 'string' ? schema.type : 'any';
  parts.push(type === 'array' && schema.items ? `array of ${schemaSummary(schema.items as SchemaObject)}` : escapeHtml(type));
  if (typeof schema.format === 'string') parts.push(`format ${code(schema.format)}`);
  if (Array.isArray(schema.enum)) parts.push(`one of ${schema.enum.map((v) => code(String(v))).join(', ')}`);
  const length = range(schema.minLength, schema.maxLength);
  if (length) parts.push(`${length} characters`);
  const value = range(schema.minimum, schema.maximum);
  if (value) parts.push(value);
  if (typeof schema.pattern === 'string') parts.push(`matching ${code(schema.pattern)}`);
  if (schema.default !== undefined) parts.push(`default ${code(String(schema.default))}`);
  return parts.join(', ');
}

/** Backquoted spans in descriptions become code, everything else is escaped text. */
function prose(text: string | undefined): string {
  return escapeHtml(text ?? '').replace(/`([^`]*)`/g, '<code>$1</code>');
}

function table(head: string[], rows: string[][]): string {
  if (rows.length === 0) return '';
  const th = head.map((cell) => `<th>${cell}</th>`).join('');
  const tr = rows.map((row) => `<tr>${row.map((cell) => `<td>${cell}</td>`).join('')}</tr>`).join('\n');
  return `<div class="table-wrap"><table><thead><tr>${th}</tr></thead><tbody>\n${tr}\n</tbody></table></div>`;
}

function parameterRows(doc: OpenApiDocument, parameters: Array<ParameterObject | Reference>): string[][] {
  return parameters.map((entry) => {
    const parameter = isRef(entry) ? doc.components.parameters[refName(entry.$ref)]! : entry;
    return [code(parameter.name), escapeHtml(parameter.in), schemaSummary(parameter.schema), parameter.required ? 'yes' : 'no', prose(parameter.description)];
  });
}

function responseRows(doc: OpenApiDocument, responses: Record<string, ResponseObject | Reference>): string[][] {
  return Object.entries(responses).map(([status, entry]) => {
    const response = isRef(entry) ? doc.components.responses[refName(entry.$ref)]! : entry;
    const description = isRef(entry) ? `<a href="#${anchor(entry.$ref)}">${prose(response.description)}</a>` : prose(response.description);
    const bodies = Object.entries(response.content ?? {}).map(([type, { schema }]) => `${code(type)}: ${schemaSummary(schema)}`);
    const headers = Object.keys(response.headers ?? {}).map(code);
    return [escapeHtml(status), description, bodies.join('<br>'), headers.join(' ')];
  });
}

function operationSection(doc: OpenApiDocument, method: string, operation: OperationObject): string {
  const body = operation.requestBody;
  return `<div class="operation">
<h3><span class="method">${escapeHtml(method)}</span> ${escapeHtml(operation.summary)}</h3>
<p class="meta">${code(operation.operationId)}</p>
${operation.description ? `<p>${prose(operation.description)}</p>` : ''}
${table(['Parameter', 'In', 'Type', 'Required', 'Description'], parameterRows(doc, operation.parameters ?? []))}
${body ? `<p>Request body (${body.required ? 'required' : 'optional'}): ${Object.entries(body.content).map(([type, { schema }]) => `${code(type)} ${schemaSummary(schema)}`).join('; ')}</p>` : ''}
${table(['Status', 'Description', 'Body', 'Headers'], responseRows(doc, operation.responses))}
</div>`;
}

function schemaSection(name: string, schema: SchemaObject): string {
  const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
  const properties = Object.entries((schema.properties ?? {}) as Record<string, SchemaObject>);
  const rows = properties.map(([property, value]) => [
    code(property),
    schemaSummary(value),
    required.has(property) ? 'yes' : 'no',
    value.readOnly ? 'read-only' : '',
    prose(typeof value.description === 'string' ? value.description : typeof value.title === 'string' ? value.title : ''),
  ]);
  return `<section id="schemas-${escapeHtml(name)}"><h3>${escapeHtml(name)}</h3>
<p>${prose(typeof schema.description === 'string' ? schema.description : schemaSummary(schema))}</p>
${table(['Field', 'Type', 'Required', '', 'Description'], rows)}</section>`;
}

const drawn = new WeakMap<OpenApiDocument, string>();

/**
 * The docs view's page (`View.page`), drawn inside the shared layout: the view's body is the
 * OpenAPI document, built once, so its page is drawn once too.
 */
export const docsPage: PageTemplate = (body) => {
  const doc = body as OpenApiDocument;
  let page = drawn.get(doc);
  if (page === undefined) drawn.set(doc, (page = renderDocsPage(doc)));
  return page;
};

/** The page's content: overview, authentication, each path and operation, then the components. */
export function renderDocsPage(doc: OpenApiDocument): string {
  const paths = Object.entries(doc.paths);
  const contents = paths
    .map(([path, item]) => {
      const methods = OPERATION_METHODS.filter((m) => item[m.toLowerCase() as keyof typeof item]);
      return `<li><a href="#${escapeHtml(pathAnchor(path))}">${code(path)}</a> ${escapeHtml(methods.join(', '))}</li>`;
    })
    .join('\n');
  const pathSections = paths
    .map(([path, item]) => {
      const operations = OPERATION_METHODS.flatMap((method) => {
        const operation = item[method.toLowerCase() as Lowercase<typeof method>];
        return operation ? [operationSection(doc, method, operation)] : [];
      });
      const parameters = table(['Path parameter', 'In', 'Type', 'Required', 'Description'], parameterRows(doc, item.parameters ?? []));
      return `<section id="${escapeHtml(pathAnchor(path))}"><h2>${code(path)}</h2>\n${parameters}\n${operations.join('\n')}</section>`;
    })
    .join('\n');
  const security = Object.entries(doc.components.securitySchemes)
    .map(([name, scheme]) => [code(name), escapeHtml(scheme.type === 'http' ? `HTTP ${scheme.scheme ?? ''}` : `${scheme.in ?? ''} ${scheme.name ?? ''}`), prose(scheme.description)]);
  const responses = Object.entries(doc.components.responses).map(([name, response]) => [
    `<span id="responses-${escapeHtml(name)}">${escapeHtml(name)}</span>`,
    prose(response.description),
    Object.keys(response.headers ?? {}).map(code).join(' '),
  ]);
  const headers = Object.entries(doc.components.headers).map(([name, header]) => [code(name), schemaSummary(header.schema), prose(header.description)]);
  const schemas = Object.entries(doc.components.schemas).map(([name, schema]) => schemaSection(name, schema)).join('\n');

  return `<div class="docs">
<div class="page-head">
<h1>${escapeHtml(doc.info.title)} API</h1>
<p class="lead">Version ${escapeHtml(doc.info.version)} · <a href="/api/v1/openapi.json">openapi.json</a></p>
</div>
<p>${prose(doc.info.description)}</p>
<h2>Authentication</h2>
<p>Any one of these, or none for what anonymous callers may do.</p>
${table(['Scheme', 'Kind', 'Description'], security)}
<h2>Paths</h2>
<ul>
${contents}
</ul>
${pathSections}
<h2>Schemas</h2>
${schemas}
<h2>Common responses</h2>
<p>Errors are <code>application/problem+json</code>: see <a href="#schemas-Problem">Problem</a>.</p>
${table(['Name', 'Description', 'Headers'], responses)}
<h2>Headers</h2>
${table(['Header', 'Type', 'Description'], headers)}
</div>`;
}

/** `/api/v1/experiences/{id}/` → `path-api-v1-experiences-id-`. */
function pathAnchor(path: string): string {
  return `path${path.replace(/\W+/g, '-')}`;
}
