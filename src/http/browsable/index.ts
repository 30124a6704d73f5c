import { html } from 'ghtml';
import type { User } from '../caller.js';
import type { RenderContext } from '../view.js';
import { layout } from './layout.js';
import { pageHeading, resourcePage } from './resource-page.js';
import { responseView } from './response-view.js';

// The browsable API (issue 12): every `/api/v1/` GET asked for as text/html renders a page from
// the view, its declaration's metadata and the response. Most views use the generic page; a view
// that names its own (`View.page`: the webhook and delivery dashboards of API.md §4, declared
// beside them in webhooks/pages/; the login page; the API docs, in resources/openapi/) gets that
// one for a GET's body.

/** Renders a response body as a browsable page. */
export function renderBrowsable(body: unknown, context: RenderContext): string {
  // A dashboard draws a GET's 200 body; anything else (OPTIONS metadata, a 201, a 202) is shown
  // by the generic page, which renders any JSON.
  const read = (context.method === 'GET' || context.method === 'HEAD') && context.status === 200;
  const page = (read ? context.view.page : undefined) ?? resourcePage;
  return layout({ title: context.view.name, path: context.path, user: context.user, main: page(body, context) });
}

/** An error answered to a browser (a problem+json body): the message, a way on, and the raw problem. */
export function renderProblemPage(
  problem: { title: string; status: number; detail?: string },
  context: { path: string; user: User | null; headers: Readonly<Record<string, string>> },
): string {
  const help =
    problem.status === 401
      ? html`<p><a class="btn btn-primary" href="/api/v1/auth/login/?next=${encodeURIComponent(context.path)}">Log in</a></p>`
      : problem.status === 429
        ? html`<p>Wait ${context.headers['retry-after'] ?? 'a moment'} seconds and reload the page.</p>`
        : '';
  const main = html`!${pageHeading(problem.title, undefined, [])}
<div class="flash flash-error" role="alert"><p>${problem.detail ?? problem.title}</p>!${help}</div>
!${responseView({ method: 'GET', path: context.path, status: problem.status, allow: [], headers: context.headers, body: problem })}`;
  return layout({ title: problem.title, path: context.path, user: context.user, main });
}
