// Admin: the domain blocklist, and links to a host across every tenant, disabled in one action.

import { get, query, request } from './api.js';
import { el, field, notify } from './dom.js';
import { may } from './app.js';
import { stateBadge } from './links.js';
import { allDomains } from './domains.js';

async function blocklistSection() {
  const list = el('ul', { id: 'blocklist' });
  const input = el('input', { type: 'text', placeholder: '.evil.example', required: true });
  async function load() {
    const result = await get('/admin/blocklist');
    list.replaceChildren(...result.entries.map((entry) => {
      const item = el('li', {}, el('span', { class: 'code' }, entry.domain), ' ',
        el('span', { class: 'hint' }, entry.source === 'file' ? '(from the blocklist file)' : ''));
      if (entry.source !== 'file') {
        const remove = el('button', { type: 'button', class: 'secondary', 'aria-label': `Remove ${entry.domain}` }, 'Remove');
        remove.addEventListener('click', async () => {
          try {
            await request('DELETE', `/admin/blocklist/${encodeURIComponent(entry.domain)}`);
            notify(`${entry.domain} removed from the blocklist.`);
            await load();
          } catch (error) {
            notify(error.message, 'error');
          }
        });
        item.append(' ', remove);
      }
      return item;
    }));
    if (!result.entries.length) list.append(el('li', { class: 'hint' }, 'No blocked domains.'));
  }
  const form = el('form', { 'aria-label': 'Block a domain' },
    el('div', { class: 'row' }, field('Block a domain', input, 'A leading dot blocks every subdomain too. New links to it are refused; existing ones stop redirecting on every node.'),
      el('button', { type: 'submit' }, 'Block')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await request('POST', '/admin/blocklist', { body: { domain: input.value.trim() } });
      notify(`${input.value.trim()} blocked.`);
      input.value = '';
      await load();
    } catch (error) {
      notify(error.message, 'error');
    }
  });
  await load();
  return el('section', { 'aria-labelledby': 'blocklist-title' }, el('h2', { id: 'blocklist-title' }, 'Blocked domains'), list, form);
}

function campaignSection() {
  const host = el('input', { type: 'text', placeholder: '.phish.example', required: true });
  const found = el('tbody');
  const status = el('p', { 'aria-live': 'polite' });
  const disableAll = el('button', { type: 'button', class: 'danger', hidden: true }, 'Disable all');
  let codes = [];
  const form = el('form', { role: 'search', 'aria-label': 'Find links to a host' },
    el('div', { class: 'row' }, field('Target host', host, 'Every tenant\'s active links to this host (a leading dot: and its subdomains).'),
      el('button', { type: 'submit' }, 'Find')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    found.replaceChildren();
    codes = [];
    status.textContent = 'Searching…';
    try {
      // An alias on a branded domain is changed only with its host named.
      const branded = new Set((await allDomains()).map((d) => d.host));
      let cursor = null;
      do {
        const page = await get(`/links${query({ host: host.value.trim(), state: 'active', limit: 1000, cursor })}`);
        for (const link of page.links) {
          codes.push({ code: link.code, domain: branded.has(link.domain) ? link.domain : null });
          found.append(el('tr', {}, el('td', { class: 'code' }, link.code), el('td', {}, link.domain), el('td', {}, link.tenant),
            el('td', { class: 'url' }, link.url), el('td', {}, stateBadge(link.state))));
        }
        cursor = page.next_cursor;
      } while (cursor && codes.length < 100000);
      status.textContent = `${codes.length} active links.`;
      disableAll.hidden = codes.length === 0;
      disableAll.textContent = `Disable all ${codes.length}`;
    } catch (error) {
      status.textContent = '';
      notify(error.message, 'error');
    }
  });
  disableAll.addEventListener('click', async () => {
    disableAll.disabled = true;
    let done = 0;
    let failed = 0;
    const queue = codes.slice();
    const worker = async () => {
      while (queue.length) {
        const { code, domain } = queue.shift();
        try {
          await request('PATCH', `/links/${encodeURIComponent(code)}${query({ domain })}`, { body: { disabled: true }, type: 'application/merge-patch+json' });
          done += 1;
        } catch {
          failed += 1;
        }
        status.textContent = `Disabled ${done} of ${codes.length}${failed ? `, ${failed} failed` : ''}.`;
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    notify(`Disabled ${done} links${failed ? `; ${failed} failed` : ''}.`, failed ? 'error' : 'ok');
    disableAll.disabled = false;
    disableAll.hidden = true;
  });
  return el('section', { 'aria-labelledby': 'campaign-title' }, el('h2', { id: 'campaign-title' }, 'Links to a host, every tenant'),
    form, status, disableAll,
    el('table', {}, el('thead', {}, el('tr', {}, ['Code', 'Domain', 'Tenant', 'Target', 'State'].map((h) => el('th', { scope: 'col' }, h)))), found));
}

export async function adminPage() {
  if (!may('admin')) return [el('p', { role: 'alert' }, 'This page needs an admin key.')];
  return [el('section', {}, el('h1', {}, 'Admin'), await blocklistSection(), campaignSection())];
}
