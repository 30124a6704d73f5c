// restwire's browsable API: the one script its pages load (issue 12). Served from
// /static/restwire/ under `script-src 'self'`; no inline script anywhere. It sends the
// generated forms as JSON with the CSRF header and If-Match, shows validation errors beside
// their fields, logs in and out, copies secrets, and keeps list, record and deliveries pages
// up to date from their own event streams. Plain DOM, no library.
'use strict';

(function browsable() {
  const csrfToken = () => (document.cookie.match(/(?:^|;\s*)csrftoken=([^;]*)/) || [])[1] || '';

  /** fetch with the session's CSRF token (API.md §3) and JSON both ways. */
  async function api(method, url, body, extraHeaders) {
    // X-Requested-With: a 401 then carries no Basic challenge, so the browser shows no login dialog.
    const headers = { Accept: 'application/json', 'X-Requested-With': 'XMLHttpRequest', ...extraHeaders };
    const token = csrfToken();
    if (token) headers['X-CSRFToken'] = decodeURIComponent(token);
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(url, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await response.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    return { response, data };
  }

  function toast(message) {
    const el = document.getElementById('toast');
    if (!el) return;
    el.textContent = message;
    el.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { el.hidden = true; }, 4000);
  }

  function clearErrors(form) {
    for (const el of form.querySelectorAll('[data-error-for]')) { el.hidden = true; el.textContent = ''; }
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    const general = form.querySelector('[data-form-error]');
    if (general) { general.hidden = true; general.textContent = ''; }
  }

  function showFormError(form, message) {
    const general = form.querySelector('[data-form-error]');
    if (general) { general.textContent = message; general.hidden = false; general.focus?.(); }
    else toast(message);
  }

  /** Puts each field's messages beside it; the rest (and a summary) above the form. */
  function showErrors(form, problem) {
    const errors = (problem && problem.errors) || {};
    let first = null;
    const unplaced = [];
    for (const [name, messages] of Object.entries(errors)) {
      const text = [].concat(messages).join(' ');
      const slot = form.querySelector(`[data-error-for="${CSS.escape(name)}"]`);
      if (!slot) { unplaced.push(`${name}: ${text}`); continue; }
      slot.textContent = text;
      slot.hidden = false;
      const input = form.querySelector(`[data-field="${CSS.escape(name)}"] input, [data-field="${CSS.escape(name)}"] select, [data-field="${CSS.escape(name)}"] textarea`);
      if (input) { input.setAttribute('aria-invalid', 'true'); first = first || input; }
    }
    const detail = (problem && problem.detail) || 'The request failed.';
    showFormError(form, unplaced.length ? `${detail} ${unplaced.join(' ')}` : detail);
    if (first) first.focus();
  }

  /** A message for a failed request that is not a validation error. */
  function failureMessage(response, data) {
    if (response.status === 412) return 'This record was changed since you loaded the page. Reload the page to see the current version, then make your change again.';
    if (response.status === 429) return `Too many requests. Try again in ${response.headers.get('Retry-After') || 'a few'} seconds.`;
    if (response.status === 401) return 'You are not logged in (or your session ended). Log in and try again.';
    if (response.status === 403) return (data && data.detail) || 'You do not have permission to do this.';
    return (data && (data.detail || data.title)) || `The request failed (HTTP ${response.status}).`;
  }

  /** One field's value as JSON, or undefined to leave it out. */
  function fieldValue(wrapper) {
    const type = wrapper.dataset.type;
    const nullable = wrapper.hasAttribute('data-nullable');
    if (type === 'references' || type === 'list') {
      const checked = [...wrapper.querySelectorAll('input[type=checkbox]:checked')].map((box) => box.value);
      return type === 'list' && checked.length === 0 ? undefined : checked;
    }
    const input = wrapper.querySelector('input, select, textarea');
    if (type === 'boolean') return input.checked;
    const raw = input.value;
    if (raw.trim() === '') return nullable ? null : undefined;
    if (type === 'integer' && /^-?\d+$/.test(raw.trim())) return Number(raw);
    if (type === 'datetime') return /(Z|[+-]\d\d:?\d\d)$/.test(raw) ? raw : `${raw}Z`;
    if (type === 'json') {
      try { return JSON.parse(raw); } catch { throw Object.assign(new Error('Enter valid JSON.'), { field: wrapper.dataset.field }); }
    }
    return raw;
  }

  function formBody(form, onlyChanged) {
    const body = {};
    for (const wrapper of form.querySelectorAll('[data-field]')) {
      if (onlyChanged && !wrapper.hasAttribute('data-dirty')) continue;
      // Too long to be put in the form (forms.ts FORM_VALUE_LIMIT): kept as stored.
      if (wrapper.hasAttribute('data-too-long')) continue;
      const value = fieldValue(wrapper);
      if (value !== undefined) body[wrapper.dataset.field] = value;
    }
    return body;
  }

  /** A webhook secret as API.md §6 wants it: whsec_ + base64 of 32 random bytes. */
  function newSecret() {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    return `whsec_${btoa(String.fromCharCode(...bytes))}`;
  }

  function showSecret(panel, secret, link) {
    panel.replaceChildren();
    const heading = document.createElement('p');
    heading.innerHTML = '<strong>Copy the secret now.</strong> It is shown once and cannot be seen again.';
    const row = document.createElement('div');
    row.className = 'copy-row';
    const input = document.createElement('input');
    input.id = 'new-secret';
    input.readOnly = true;
    input.value = secret;
    input.className = 'mono';
    const label = document.createElement('label');
    label.htmlFor = 'new-secret';
    label.className = 'visually-hidden';
    label.textContent = 'Webhook secret';
    const copy = document.createElement('button');
    copy.type = 'button';
    copy.className = 'btn';
    copy.dataset.copy = 'new-secret';
    copy.textContent = 'Copy';
    row.append(label, input, copy);
    panel.append(heading, row);
    if (link) {
      const p = document.createElement('p');
      const a = document.createElement('a');
      a.href = link;
      a.textContent = 'Open the new webhook →';
      p.append(a);
      panel.append(p);
    }
    panel.hidden = false;
    input.select();
  }

  async function submitApiForm(form, submitter) {
    const method = (submitter && submitter.value) || 'POST';
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) return;
    clearErrors(form);
    let body;
    try {
      if (form.dataset.body) body = JSON.parse(form.dataset.body);
      else if (form.dataset.special === 'rotate-secret') body = { secret: newSecret() };
      else if (method !== 'DELETE' && form.querySelector('[data-field]')) body = formBody(form, method === 'PATCH');
    } catch (error) {
      showErrors(form, { detail: 'Check the highlighted field.', errors: { [error.field]: [error.message] } });
      return;
    }
    const headers = form.dataset.etag ? { 'If-Match': form.dataset.etag } : {};
    if (submitter) submitter.disabled = true;
    try {
      const { response, data } = await api(method, form.dataset.action, body, headers);
      if (response.ok) return succeeded(form, response, data, body);
      if (response.status === 400 && data && data.errors) showErrors(form, data);
      else showFormError(form, failureMessage(response, data));
    } catch {
      showFormError(form, 'The server could not be reached.');
    } finally {
      if (submitter) submitter.disabled = false;
    }
  }

  function succeeded(form, response, data, body) {
    const after = form.dataset.after;
    if (after === 'secret') {
      const secret = (data && data.secret) || (body && body.secret);
      const panel = form.closest('.box').parentElement.querySelector('[data-secret-panel]') || document.querySelector('[data-secret-panel]') || form.parentElement.appendChild(Object.assign(document.createElement('div'), { className: 'secret-once' }));
      panel.setAttribute('data-secret-panel', '');
      showSecret(panel, secret, data && data.url && !location.pathname.endsWith(data.url) ? data.url : null);
      if (form.id === 'create') form.reset();
      toast(form.id === 'create' ? 'Webhook created.' : 'Secret rotated.');
      return;
    }
    if (after === 'follow') {
      location.assign(response.headers.get('Location') || (data && data.url) || location.href);
      return;
    }
    if (after === 'redirect') {
      location.assign(form.dataset.redirect);
      return;
    }
    sessionStorage.setItem('restwire-toast', response.status === 202 ? 'Queued.' : 'Saved.');
    location.reload();
  }

  /** Fills reference selects and checkbox lists from the target collection's first page. */
  async function loadOptions(container) {
    const { response, data } = await api('GET', `${container.dataset.optionsFrom}?limit=100`);
    if (!response.ok || !data || !Array.isArray(data.results)) return;
    const isSelect = container.tagName === 'SELECT';
    for (const record of data.results) {
      const label = describe(record);
      if (isSelect) {
        let option = [...container.options].find((o) => o.value === record.url);
        if (!option) { option = new Option(label, record.url); container.add(option); }
        option.textContent = label;
      } else {
        let box = [...container.querySelectorAll('input')].find((input) => input.value === record.url);
        if (!box) {
          const wrapper = document.createElement('label');
          wrapper.className = 'check';
          box = document.createElement('input');
          box.type = 'checkbox';
          box.name = container.dataset.name;
          box.value = record.url;
          const span = document.createElement('span');
          wrapper.append(box, ' ', span);
          container.append(wrapper);
        }
        box.parentElement.querySelector('span').textContent = label;
      }
    }
  }

  /** A record's name for a list: its first text value, and its id. */
  function describe(record) {
    for (const [key, value] of Object.entries(record)) {
      if (typeof value === 'string' && value && !value.startsWith('/api/') && !/_at$/.test(key)) return `${value} (#${record.id})`;
    }
    return `#${record.id}`;
  }

  async function login(form) {
    clearErrors(form);
    const body = { username: form.elements.username.value, password: form.elements.password.value };
    const button = form.querySelector('button[type=submit]');
    button.disabled = true;
    try {
      const { response } = await api('POST', '/api/v1/auth/session/', body);
      if (response.ok) { location.assign(form.dataset.next || '/api/v1/'); return; }
      if (response.status === 429) showFormError(form, `Too many failed logins. Try again in ${response.headers.get('Retry-After') || 'a few'} seconds.`);
      else if (response.status === 400) showFormError(form, 'Enter your username and password.');
      // The same words for a wrong username and a wrong password (API.md §6).
      else showFormError(form, 'Invalid username or password.');
      form.elements.password.value = '';
    } catch {
      showFormError(form, 'The server could not be reached.');
    } finally {
      button.disabled = false;
    }
  }

  /**
   * Follows the page's own event stream (STREAMS.md §5): on each change the region is drawn
   * again from a fresh read, so new records appear, changed ones change and deleted ones go.
   * It starts after the position the page was read at (the `since` in data-stream); EventSource
   * reconnects and resumes by itself (Last-Event-ID).
   */
  function followStream(region, url = region.dataset.stream) {
    const source = new EventSource(url, { withCredentials: true });
    let pending = null;
    const redraw = () => {
      pending ??= setTimeout(async () => {
        pending = null;
        try {
          const response = await fetch(location.href, { headers: { Accept: 'text/html' }, credentials: 'same-origin' });
          if (!response.ok) return;
          const fresh = new DOMParser().parseFromString(await response.text(), 'text/html').getElementById(region.id);
          if (fresh) region.innerHTML = fresh.innerHTML;
        } catch { /* the next change redraws */ }
      }, 150);
    };
    for (const kind of ['created', 'updated', 'deleted']) source.addEventListener(kind, redraw);
    // Too far behind: read again and follow from now (a reconnect would resume at the same old position).
    source.addEventListener('reset', () => {
      source.close();
      redraw();
      const now = new URL(url, location.href);
      now.searchParams.delete('since');
      followStream(region, now.pathname + now.search);
    });
  }

  async function copy(button) {
    const input = document.getElementById(button.dataset.copy);
    if (!input) return;
    try { await navigator.clipboard.writeText(input.value); } catch { input.select(); document.execCommand('copy'); }
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 2000);
  }

  document.addEventListener('submit', (event) => {
    const form = event.target;
    if (form.id === 'login-form') { event.preventDefault(); login(form); return; }
    if (form.classList.contains('api-form')) { event.preventDefault(); submitApiForm(form, event.submitter); }
  });
  document.addEventListener('input', (event) => event.target.closest?.('[data-field]')?.setAttribute('data-dirty', ''));
  document.addEventListener('change', (event) => event.target.closest?.('[data-field]')?.setAttribute('data-dirty', ''));
  /** Saves this URL's JSON representation (API.md §1: chosen by Accept, never by a query parameter). */
  async function downloadJson(link) {
    try {
      const response = await fetch(link.href, { headers: { Accept: 'application/json' }, credentials: 'same-origin' });
      if (!response.ok) { toast(`The JSON could not be fetched (HTTP ${response.status}).`); return; }
      const url = URL.createObjectURL(await response.blob());
      const save = Object.assign(document.createElement('a'), { href: url, download: `${location.pathname.split('/').filter(Boolean).join('-') || 'response'}.json` });
      document.body.append(save);
      save.click();
      save.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch {
      toast('The server could not be reached.');
    }
  }

  document.addEventListener('click', async (event) => {
    const link = event.target.closest?.('a[data-json-download]');
    if (link) { event.preventDefault(); downloadJson(link); return; }
    const button = event.target.closest?.('button');
    if (!button) return;
    if (button.hasAttribute('data-copy')) copy(button);
    if (button.hasAttribute('data-logout')) {
      await api('DELETE', '/api/v1/auth/session/');
      location.reload();
    }
  });

  function start() {
    for (const container of document.querySelectorAll('[data-options-from]')) loadOptions(container);
    for (const region of document.querySelectorAll('[data-stream]')) followStream(region);
    const message = sessionStorage.getItem('restwire-toast');
    if (message) { sessionStorage.removeItem('restwire-toast'); toast(message); }
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
