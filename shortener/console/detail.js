// One link: its facts, QR code, clicks, history, and the actions the key allows.

import { blobUrl, get, problem, query, request } from './api.js';
import { clear, confirmDialog, el, notify, time } from './dom.js';
import { may } from './app.js';
import { linkHash, stateBadge, tags } from './links.js';
import { PERIODS, barChart, span } from './chart.js';
import { routingSection, ruleText, splitText } from './routing.js';

function facts(link) {
  const copy = el('button', { type: 'button', class: 'secondary' }, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(link.short_url);
      notify('Short URL copied.');
    } catch {
      notify('The browser did not allow copying; select the URL instead.', 'error');
    }
  });
  const row = (name, ...value) => [el('dt', {}, name), el('dd', {}, ...value)];
  return el('dl', { class: 'facts' },
    row('Short URL', el('span', { class: 'code', id: 'short-url' }, link.short_url), ' ', copy),
    row('Domain', el('span', { id: 'domain' }, link.domain)),
    row('Target', el('span', { id: 'target' }, link.url)),
    row('State', stateBadge(link.state)),
    row('Tags', link.tags.length ? tags(link.tags) : '—'),
    row('Created', time(link.created_at), ' by ', link.owner),
    row('Expires', time(link.expires_at)),
    row('Visit limit', link.max_visits == null ? '—' : String(link.max_visits)),
    row('Password', link.protected ? 'yes' : 'no'),
    row('Clicks', `${link.clicks.human} people, ${link.clicks.bot} bots, ${link.clicks.head} HEAD`));
}

async function qrSection(code, domain) {
  const path = (format) => `/links/${encodeURIComponent(code)}/qr${query({ domain, format, size: 512 })}`;
  const image = el('img', { alt: `QR code of the short URL of ${code}`, id: 'qr-image' });
  const save = (format) => {
    const button = el('button', { type: 'button', class: 'secondary' }, `Download ${format.toUpperCase()}`);
    button.addEventListener('click', async () => {
      try {
        const url = await blobUrl(path(format));
        const a = el('a', { href: url, download: `${code}.${format}` });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 1000);
      } catch (error) {
        notify(problem(error), 'error');
      }
    });
    return button;
  };
  blobUrl(path('svg')).then((url) => { image.src = url; }).catch((error) => notify(problem(error), 'error'));
  return el('section', { 'aria-labelledby': 'qr-title' }, el('h2', { id: 'qr-title' }, 'QR code'),
    el('div', { class: 'qr' }, image, el('div', { class: 'actions' }, save('svg'), save('png'))));
}

function top(title, rows, key) {
  return el('div', {}, el('h3', {}, title), rows.length
    ? el('table', {}, el('tbody', {}, rows.slice(0, 10).map((r) => el('tr', {},
      el('td', {}, r[key] ?? '(none)'), el('td', {}, String(r.visits))))))
    : el('p', { class: 'hint' }, 'None yet.'));
}

/// "Counts as of 14:03:27, updated every 30 s.": how far the counts reach, so that visits not
/// written yet are not taken for missing ones.
function freshness(stats) {
  const asOf = new Date(stats.as_of);
  const pad2 = (n) => String(n).padStart(2, '0');
  const clock = Number.isNaN(asOf.getTime()) ? stats.as_of
    : `${pad2(asOf.getHours())}:${pad2(asOf.getMinutes())}:${pad2(asOf.getSeconds())}`;
  const every = stats.flush_interval_ms;
  const then = every == null
    ? 'this node counts no new visits (analytics are off).'
    : `updated every ${every % 1000 ? every / 1000 : Math.round(every / 1000)} s; newer visits show after the next update.`;
  return el('p', { class: 'hint', id: 'stats-as-of', title: stats.as_of }, `Counts as of ${clock}, ${then}`);
}

function statsSection(code, domain) {
  const body = el('div', { 'aria-live': 'polite' }, el('p', { class: 'hint' }, 'Loading…'));
  const range = el('select', { 'aria-label': 'Chart period' },
    PERIODS.map((p) => el('option', { value: p.key }, p.label)));
  const refresh = el('button', { type: 'button', class: 'secondary' }, 'Refresh');
  async function load() {
    const period = span(PERIODS.find((p) => p.key === range.value) || PERIODS[0]);
    try {
      const stats = await get(`/links/${encodeURIComponent(code)}/stats${query({
        domain,
        granularity: period.granularity,
        from: new Date(period.start).toISOString(),
        to: new Date().toISOString() })}`);
      clear(body).append(barChart(stats.series, period), freshness(stats),
        el('div', { class: 'cols' },
          top('Top referrers', stats.referrers, 'host'),
          top('Devices', stats.devices, 'device'),
          top('Countries', stats.countries, 'country')));
    } catch (error) {
      clear(body).append(el('p', { class: 'hint' }, `No statistics: ${error.message}`));
    }
  }
  range.addEventListener('change', load);
  refresh.addEventListener('click', load);
  load();
  return el('section', { 'aria-labelledby': 'stats-title' }, el('h2', { id: 'stats-title' }, 'Clicks'),
    el('div', { class: 'actions' }, range, refresh), body);
}

const FIELDS = {
  url: 'url', expires_at: 'expires', tags: 'tags', max_visits: 'visit limit',
  password: 'password', rules: 'rules', ios: 'iOS target', android: 'Android target',
  variants: 'split', disabled: 'disabled', deleted: 'deleted', imported: 'imported',
};

/// A recorded value in words: times as `2027-01-01 09:30` (this browser's time zone), lists
/// joined, nothing as `never` (an expiry) or `none`.
function value(field, v) {
  if (v === null || v === undefined || (Array.isArray(v) && !v.length)) {
    return field === 'expires_at' ? 'never' : 'none';
  }
  if (field === 'rules' && Array.isArray(v)) return v.map((rule, i) => `${i + 1}. ${ruleText(rule)}`).join('; ');
  if (field === 'variants' && Array.isArray(v)) return splitText(v);
  if (Array.isArray(v)) return v.join(', ');
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (v === '(set)') return 'set';
  if (field === 'expires_at') {
    const t = new Date(v);
    if (!Number.isNaN(t.getTime())) {
      const pad2 = (n) => String(n).padStart(2, '0');
      return `${t.getFullYear()}-${pad2(t.getMonth() + 1)}-${pad2(t.getDate())} ${pad2(t.getHours())}:${pad2(t.getMinutes())}`;
    }
  }
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

/// One line per changed field: `url: <old> -> <new>`; a creation lists what the
/// link was made with (`url: <value>`).
function changeLines(event) {
  const order = Object.keys(FIELDS);
  const rank = (field) => (order.includes(field) ? order.indexOf(field) : order.length);
  const fields = Object.entries(event.change || {}).sort(([a], [b]) => rank(a) - rank(b));
  return fields.map(([field, c]) => {
    const name = FIELDS[field] || field;
    const line = event.kind === 'create' && c.old == null
      ? `${name}: ${value(field, c.new)}`
      : `${name}: ${value(field, c.old)} -> ${value(field, c.new)}`;
    return el('li', {}, line);
  });
}

function historySection(events, truncated) {
  return el('section', { 'aria-labelledby': 'history-title' }, el('h2', { id: 'history-title' }, 'History'),
    truncated ? el('p', {}, `The latest ${events.length} changes; earlier ones are not shown.`) : null,
    el('ol', { class: 'events' }, events.map((e) => el('li', {},
      el('strong', {}, e.kind), ` ${time(e.at)} by `, el('span', { class: 'code' }, e.key),
      el('ul', { class: 'changes' }, changeLines(e))))));
}

function confirmDelete(code, onYes) {
  confirmDialog(`Delete ${code}?`, `The code ${code} will answer 410 for good and is never reused. This cannot be undone.`,
    `Delete ${code}`, 'Keep it', onYes);
}

/// The page of the link `code`; `domain` names its branded domain (none: the default domain,
/// or a generated code, found on any).
export async function detailPage(code, domain) {
  const enc = encodeURIComponent(code);
  const on = query({ domain });
  const [link, history] = await Promise.all([get(`/links/${enc}${on}`), get(`/links/${enc}/history${on}`)]);
  const actions = el('div', { class: 'actions' });
  const live = link.state !== 'deleted';
  if (may('links:write') && live) {
    actions.append(el('a', { class: 'button', href: linkHash(code, domain, '/edit') }, 'Edit'));
    const disabled = link.state === 'disabled';
    const toggle = el('button', { type: 'button', class: 'secondary' }, disabled ? 'Enable' : 'Disable');
    toggle.addEventListener('click', async () => {
      try {
        await request('PATCH', `/links/${enc}${on}`, { body: { disabled: !disabled }, type: 'application/merge-patch+json' });
        notify(disabled ? `${code} redirects again.` : `${code} is disabled: it answers 410.`);
        window.dispatchEvent(new HashChangeEvent('hashchange'));
      } catch (error) {
        notify(problem(error), 'error');
      }
    });
    const remove = el('button', { type: 'button', class: 'danger' }, 'Delete');
    remove.addEventListener('click', () => confirmDelete(code, async () => {
      try {
        await request('DELETE', `/links/${enc}${on}`);
        notify(`${code} deleted.`);
        location.hash = '#/links';
      } catch (error) {
        notify(problem(error), 'error');
      }
    }));
    actions.append(toggle, remove);
  }
  const page = el('article', { 'aria-labelledby': 'link-title' },
    el('h1', { id: 'link-title', tabindex: -1 }, 'Link ', el('span', { class: 'code' }, link.code)),
    facts(link), actions, routingSection(link), await qrSection(code, domain),
    may('stats:read') ? statsSection(code, domain) : null,
    historySection(history.events, history.truncated));
  return [page, () => document.getElementById('link-title')?.focus()];
}
