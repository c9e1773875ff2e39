// Branded domains: the tenant's list, claiming a host, a domain's settings (fallbacks, redirect
// status, robots, app-link files) and removing it; and the domain choice of the link forms.

import { ApiError, get, problem, query, request } from './api.js';
import { confirmDialog, el, field, notify, time } from './dom.js';
import { may, session } from './app.js';

const enc = encodeURIComponent;

/// Every domain the key sees (its tenant's; every tenant's for `admin`), all pages; none for a
/// key that may not read them.
export async function allDomains() {
  const found = [];
  let cursor = null;
  try {
    do {
      const page = await get(`/domains${query({ limit: 1000, cursor })}`);
      found.push(...page.domains);
      cursor = page.next_cursor;
    } while (cursor && found.length < 100000);
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) return [];
    throw error;
  }
  return found;
}

/// A select of the default domain and `domains` (hosts), labelled for the link forms.
export function domainChoice(domains, selected = '', first = 'Default domain', chosen = null) {
  const select = el('select', { name: 'domain' },
    el('option', { value: '' }, first),
    domains.map((host) => el('option', { value: host, selected: host === selected }, host)));
  const hint = chosen || (domains.length
    ? 'The host the short URL is on; an alias is taken per domain.'
    : 'Only the default domain: a branded one is claimed on the Domains page.');
  return [select, field('Domain', select, hint)];
}

/// The hosts of the signed-in key's own tenant's domains (those its links may be put on).
export async function ownHosts() {
  const domains = await allDomains();
  return domains.filter((d) => d.tenant === session.me.tenant).map((d) => d.host);
}

function row(domain) {
  return el('tr', {},
    el('td', { class: 'code' }, el('a', { href: `#/domains/${enc(domain.host)}` }, domain.host)),
    el('td', { class: 'hide-narrow' }, domain.tenant),
    el('td', { class: 'url' }, domain.root_url || '—'),
    el('td', {}, el('a', { href: `#/links${query({ domain: domain.host })}` }, 'Links')),
    el('td', { class: 'hide-narrow' }, time(domain.created_at)));
}

function claimForm() {
  const host = el('input', { type: 'text', required: true, placeholder: 'go.example.com', spellcheck: 'false' });
  const form = el('form', { 'aria-label': 'Claim a domain' },
    el('div', { class: 'row' },
      field('Host', host, 'A host name whose DNS points at this shortener; the key\'s tenant must be allowed it.'),
      el('button', { type: 'submit' }, 'Claim')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      const domain = await request('POST', '/domains', { body: { host: host.value.trim() } });
      notify(`${domain.host} claimed.`);
      location.hash = `#/domains/${enc(domain.host)}`;
    } catch (error) {
      notify(problem(error), 'error');
    }
  });
  return [form, host];
}

/// The domains list, a page at a time, and the claim form.
export async function domainsPage() {
  const body = el('tbody');
  const status = el('p', { class: 'hint', 'aria-live': 'polite' });
  const more = el('button', { type: 'button', class: 'secondary', hidden: true }, 'More domains');
  let cursor = null;
  async function page() {
    try {
      const result = await get(`/domains${query({ limit: 50, cursor })}`);
      body.append(...result.domains.map(row));
      cursor = result.next_cursor;
      more.hidden = !cursor;
      status.textContent = body.children.length ? '' : 'No domains yet: every link is on the default domain.';
    } catch (error) {
      notify(problem(error), 'error');
    }
  }
  more.addEventListener('click', page);
  await page();
  const table = el('table', { id: 'domains' },
    el('thead', {}, el('tr', {},
      el('th', { scope: 'col' }, 'Host'), el('th', { scope: 'col', class: 'hide-narrow' }, 'Tenant'),
      el('th', { scope: 'col' }, 'Root URL'), el('th', { scope: 'col' }, 'Links'),
      el('th', { scope: 'col', class: 'hide-narrow' }, 'Claimed'))),
    body);
  const [form, host] = may('links:write') ? claimForm() : [null, null];
  const section = el('section', {}, el('h1', {}, 'Domains'), form, table, status, more);
  return [section, host ? () => host.focus() : null];
}

/// The text of an app-link file for its textarea.
function fileText(value) {
  return value == null ? '' : JSON.stringify(value, null, 2);
}

/// The JSON of an app-link textarea (null when empty), or throws a message naming it.
function fileValue(name, textarea, array) {
  const text = textarea.value.trim();
  if (!text) return null;
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${name} is not JSON: ${error.message}`);
  }
  if (array !== Array.isArray(value) || value === null || typeof value !== 'object') {
    throw new Error(`${name} must be a JSON ${array ? 'array' : 'object'}`);
  }
  return value;
}

function settingsForm(domain) {
  const url = (value) => el('input', { type: 'url', value: value || '' });
  const root = url(domain.root_url);
  const notFound = url(domain.not_found_url);
  const expired = url(domain.expired_url);
  const status = el('select', {}, el('option', { value: '' }, 'The node\'s default'),
    [301, 302, 307, 308].map((s) => el('option', { value: s, selected: domain.redirect_status === s }, String(s))));
  const robots = el('select', {}, ['allow', 'disallow'].map((r) => el('option', { value: r, selected: domain.robots === r }, r)));
  const aasa = el('textarea', { rows: 6, spellcheck: 'false', class: 'code' }, fileText(domain.apple_app_site_association));
  const assetlinks = el('textarea', { rows: 6, spellcheck: 'false', class: 'code' }, fileText(domain.assetlinks));
  const form = el('form', { 'aria-labelledby': 'settings-title' },
    el('h2', { id: 'settings-title' }, 'Settings'),
    field('Root URL', root, 'Where / on this host redirects. Empty: / answers as on the default domain.'),
    field('Not-found URL', notFound, 'Where an unknown code on this host redirects. Empty: 404.'),
    field('Expired URL', expired, 'Where an expired, disabled, deleted or used-up link on this host redirects. Empty: 410.'),
    field('Redirect status', status, 'The status of this host\'s redirects.'),
    field('Robots', robots, 'What /robots.txt on this host tells crawlers.'),
    field('apple-app-site-association', aasa, 'A JSON object, served at /.well-known/apple-app-site-association. Empty: none.'),
    field('assetlinks.json', assetlinks, 'A JSON array, served at /.well-known/assetlinks.json. Empty: none.'),
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Save settings')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const patch = {};
    for (const [name, input] of [['root_url', root], ['not_found_url', notFound], ['expired_url', expired]]) {
      const value = input.value.trim() || null;
      if (value !== (domain[name] ?? null)) patch[name] = value;
    }
    const code = status.value ? Number(status.value) : null;
    if (code !== (domain.redirect_status ?? null)) patch.redirect_status = code;
    if (robots.value !== domain.robots) patch.robots = robots.value;
    for (const [name, textarea, array] of [['apple_app_site_association', aasa, false], ['assetlinks', assetlinks, true]]) {
      let value;
      try {
        value = fileValue(name, textarea, array);
        textarea.removeAttribute('aria-invalid');
      } catch (error) {
        textarea.setAttribute('aria-invalid', 'true');
        textarea.focus();
        notify(error.message, 'error');
        return;
      }
      if (JSON.stringify(value) !== JSON.stringify(domain[name] ?? null)) patch[name] = value;
    }
    if (!Object.keys(patch).length) {
      notify('Nothing changed.');
      return;
    }
    try {
      Object.assign(domain, await request('PATCH', `/domains/${enc(domain.host)}`, { body: patch, type: 'application/merge-patch+json' }));
      notify('Saved.');
    } catch (error) {
      notify(problem(error), 'error');
    }
  });
  return [form, root];
}

function removeSection(domain) {
  const refusal = el('div', { id: 'remove-error', role: 'alert' });
  const remove = el('button', { type: 'button', class: 'danger' }, 'Remove domain');
  remove.addEventListener('click', () => confirmDialog(`Remove ${domain.host}?`,
    `Its settings go, and ${domain.host} answers as a host the shortener does not know. A domain with live links on it is kept.`,
    `Remove ${domain.host}`, 'Keep it', async () => {
      refusal.replaceChildren();
      try {
        await request('DELETE', `/domains/${enc(domain.host)}`);
        notify(`${domain.host} removed.`);
        location.hash = '#/domains';
      } catch (error) {
        notify(problem(error), 'error');
        refusal.append(el('p', { class: 'refusal' }, problem(error)));
        if (error.code === 'domain_has_links') {
          refusal.append(el('p', {}, el('a', { href: `#/links${query({ domain: domain.host })}` }, `The links on ${domain.host}`)));
        }
        refusal.scrollIntoView({ block: 'nearest' });
      }
    }));
  return el('section', { 'aria-labelledby': 'remove-title' }, el('h2', { id: 'remove-title' }, 'Remove'),
    el('p', { class: 'hint' }, 'Only a domain without live links can be removed.'),
    el('div', { class: 'actions' }, remove), refusal);
}

/// One domain: its facts, settings and removal (the forms for a key with `links:write`).
export async function domainPage(host) {
  const domain = await get(`/domains/${enc(host)}`);
  const fact = (name, ...value) => [el('dt', {}, name), el('dd', {}, ...value)];
  const facts = el('dl', { class: 'facts' },
    fact('Tenant', domain.tenant),
    fact('Claimed', time(domain.created_at), ' by ', domain.created_by),
    fact('Links', el('a', { href: `#/links${query({ domain: domain.host })}` }, `The links on ${domain.host}`)));
  const writable = may('links:write');
  if (!writable) {
    facts.append(...fact('Root URL', domain.root_url || '—'), ...fact('Not-found URL', domain.not_found_url || '—'),
      ...fact('Expired URL', domain.expired_url || '—'),
      ...fact('Redirect status', domain.redirect_status ? String(domain.redirect_status) : 'the node\'s default'),
      ...fact('Robots', domain.robots));
  }
  const [form, first] = writable ? settingsForm(domain) : [null, null];
  const page = el('article', { 'aria-labelledby': 'domain-title' },
    el('h1', { id: 'domain-title', tabindex: -1 }, 'Domain ', el('span', { class: 'code' }, domain.host)),
    facts, form, writable ? removeSection(domain) : null);
  return [page, () => (first || document.getElementById('domain-title'))?.focus()];
}
