import { describe, expect, it } from 'vitest';
import { allowAny } from '../../auth/permissions.js';
import { buildOpenApi } from './document.js';
import type { View } from '../../http/view.js';
import { renderDocsPage } from './docs-page.js';
import { experiences } from '../experiences.js';

describe('renderDocsPage', () => {
  const hostile = '<script>alert(1)</script> & "quotes"';
  const view: View = {
    name: `<img src=x onerror=alert(1)>`,
    description: hostile,
    path: '/api/v1/things/:id/',
    mediaTypes: ['application/json'],
    actions: { GET: { permission: allowAny, handle: async () => ({ body: {} }) } },
  };
  const page = renderDocsPage(
    buildOpenApi({ resources: [{ ...experiences, description: hostile }], filters: new Map(), views: [view], version: '1.0.0<b>', title: 'x"y' }),
  );

  it('escapes every text taken from declarations and views', () => {
    expect(page).not.toContain('<script');
    expect(page).not.toContain('<img');
    expect(page).not.toContain('<b>');
    expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;');
    expect(page).toContain('&lt;img src=x onerror=alert(1)&gt;: retrieve');
  });

  it('describes schemas it was given even when no view uses them', () => {
    expect(page).toContain('id="schemas-Experience"');
    expect(page).toContain('<code>/api/v1/things/{id}/</code>');
  });
});
