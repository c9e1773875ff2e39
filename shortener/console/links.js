// The links list: search, tag, state and domain filters, pages fetched as the end scrolls into
// view.

import { get, problem, query } from './api.js';
import { el, field, notify } from './dom.js';
import { may } from './app.js';
import { allDomains } from './domains.js';

/// The console's address of a link: a link on a branded domain carries its host, which the API
/// needs to find an alias there (a link on the default domain needs none).
export function linkHash(code, domain, suffix = '') {
  return `#/links/${encodeURIComponent(code)}${suffix}${query({ domain })}`;
}

export function stateBadge(state) {
  return el('span', { class: `state ${state}` }, state);
}

export function tags(list) {
  return (list || []).map((t) => el('span', { class: 'tag' }, t));
}

export async function linksPage(preset = {}) {
  const domains = await allDomains().catch((error) => {
    notify(`Domains not loaded: ${problem(error)}`, 'error');
    return [];
  });
  const branded = new Set(domains.map((d) => d.host));
  const q = el('input', { type: 'search', name: 'q', value: preset.q || '', placeholder: 'part of a target URL' });
  const tag = el('input', { type: 'text', name: 'tag', value: preset.tag || '', placeholder: 'campaign-2027' });
  const state = el('select', { name: 'state' },
    ['all', 'active', 'expired', 'used_up', 'disabled', 'deleted'].map((s) => el('option', { value: s }, s)));
  const domain = el('select', { name: 'domain' }, el('option', { value: '' }, 'All domains'),
    domains.map((d) => el('option', { value: d.host, selected: d.host === preset.domain }, d.host)));
  if (preset.domain && !branded.has(preset.domain)) {
    domain.append(el('option', { value: preset.domain, selected: true }, preset.domain));
  }
  const body = el('tbody');
  const more = el('div', { class: 'more', 'aria-live': 'polite' });
  const table = el('table', {},
    el('caption', { class: 'hint' }, 'Newest first'),
    el('thead', {}, el('tr', {},
      el('th', { scope: 'col' }, 'Code'), el('th', { scope: 'col', class: 'hide-narrow' }, 'Domain'), el('th', { scope: 'col' }, 'Target'),
      el('th', { scope: 'col', class: 'hide-narrow' }, 'Tags'), el('th', { scope: 'col' }, 'State'),
      el('th', { scope: 'col', class: 'hide-narrow' }, 'Clicks'))),
    body);
  let cursor = null;
  let loading = false;
  let done = false;
  let run = 0;

  async function page() {
    if (loading || done) return;
    loading = true;
    const mine = run;
    more.textContent = 'Loading…';
    try {
      const result = await get(`/links${query({ limit: 50, q: q.value.trim(), tag: tag.value.trim(), state: state.value, domain: domain.value, cursor })}`);
      if (mine !== run) return;
      for (const link of result.links) {
        body.append(el('tr', {},
          el('td', { class: 'code' }, el('a', { href: linkHash(link.code, branded.has(link.domain) ? link.domain : null) }, link.code)),
          el('td', { class: 'hide-narrow domain' }, link.domain),
          el('td', { class: 'url' }, link.url),
          el('td', { class: 'hide-narrow' }, tags(link.tags)),
          el('td', {}, stateBadge(link.state)),
          el('td', { class: 'hide-narrow' }, String(link.clicks.human))));
      }
      cursor = result.next_cursor;
      done = !cursor;
      more.textContent = done ? (body.children.length ? 'No more links.' : 'No links match.') : '';
    } catch (error) {
      more.textContent = '';
      notify(problem(error), 'error');
      done = true;
    } finally {
      loading = false;
    }
    if (!done && more.getBoundingClientRect().top < window.innerHeight) page();
  }

  function restart(event) {
    if (event) event.preventDefault();
    run += 1;
    body.replaceChildren();
    cursor = null;
    done = false;
    loading = false;
    page();
  }

  const form = el('form', { role: 'search', 'aria-label': 'Filter links' },
    el('div', { class: 'row' },
      field('Search targets', q), field('Tag', tag), field('State', state), field('Domain', domain),
      el('button', { type: 'submit' }, 'Filter')));
  form.addEventListener('submit', restart);
  state.addEventListener('change', () => restart());
  domain.addEventListener('change', () => restart());
  const watcher = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) page();
  });
  watcher.observe(more);
  page();
  const header = el('div', { class: 'row heading' }, el('h1', {}, 'Links'),
    may('links:create') ? el('a', { class: 'button', href: '#/new' }, 'New link') : null);
  return [el('section', {}, header, form, table, more), () => q.focus()];
}
