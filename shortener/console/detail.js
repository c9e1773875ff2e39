// One link: its facts, QR code, clicks, history, and the actions the key allows.

import { blobUrl, get, query, request } from './api.js';
import { clear, el, notify, time } from './dom.js';
import { may } from './app.js';
import { stateBadge, tags } from './links.js';
import { barChart } from './chart.js';

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
    row('Target', el('span', { id: 'target' }, link.url)),
    row('State', stateBadge(link.state)),
    row('Tags', link.tags.length ? tags(link.tags) : '—'),
    row('Created', time(link.created_at), ' by ', link.owner),
    row('Expires', time(link.expires_at)),
    row('Visit limit', link.max_visits == null ? '—' : String(link.max_visits)),
    row('Password', link.protected ? 'yes' : 'no'),
    row('Clicks', `${link.clicks.human} people, ${link.clicks.bot} bots, ${link.clicks.head} HEAD`));
}

async function qrSection(code) {
  const path = (format) => `/links/${encodeURIComponent(code)}/qr${query({ format, size: 512 })}`;
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
        notify(error.message, 'error');
      }
    });
    return button;
  };
  blobUrl(path('svg')).then((url) => { image.src = url; }).catch((error) => notify(error.message, 'error'));
  return el('section', { 'aria-labelledby': 'qr-title' }, el('h2', { id: 'qr-title' }, 'QR code'),
    el('div', { class: 'qr' }, image, el('div', { class: 'actions' }, save('svg'), save('png'))));
}

function top(title, rows, key) {
  return el('div', {}, el('h3', {}, title), rows.length
    ? el('table', {}, el('tbody', {}, rows.slice(0, 10).map((r) => el('tr', {},
      el('td', {}, r[key] ?? '(none)'), el('td', {}, String(r.visits))))))
    : el('p', { class: 'hint' }, 'None yet.'));
}

function statsSection(code) {
  const body = el('div', { 'aria-live': 'polite' }, el('p', { class: 'hint' }, 'Loading…'));
  const range = el('select', { 'aria-label': 'Chart range' },
    el('option', { value: 'hour' }, 'Last 72 hours, hourly'),
    el('option', { value: 'day' }, 'Last 90 days, daily'));
  async function load() {
    const hourly = range.value === 'hour';
    const to = new Date();
    const from = new Date(to.getTime() - (hourly ? 72 * 3600e3 : 90 * 86400e3));
    try {
      const stats = await get(`/links/${encodeURIComponent(code)}/stats${query({
        granularity: range.value, from: from.toISOString(), to: to.toISOString() })}`);
      clear(body).append(barChart(stats.series, range.value),
        el('div', { class: 'cols' },
          top('Top referrers', stats.referrers, 'host'),
          top('Devices', stats.devices, 'device'),
          top('Countries', stats.countries, 'country')));
    } catch (error) {
      clear(body).append(el('p', { class: 'hint' }, `No statistics: ${error.message}`));
    }
  }
  range.addEventListener('change', load);
  load();
  return el('section', { 'aria-labelledby': 'stats-title' }, el('h2', { id: 'stats-title' }, 'Clicks'), range, body);
}

function historySection(events) {
  return el('section', { 'aria-labelledby': 'history-title' }, el('h2', { id: 'history-title' }, 'History'),
    el('ol', { class: 'events' }, events.map((e) => el('li', {},
      el('strong', {}, e.kind), ` ${time(e.at)} by `, el('span', { class: 'code' }, e.key),
      el('pre', {}, JSON.stringify(e.change, null, 1))))));
}

function confirmDelete(code, onYes) {
  const dialog = el('dialog', { 'aria-labelledby': 'confirm-title' },
    el('h2', { id: 'confirm-title' }, `Delete ${code}?`),
    el('p', {}, `The code ${code} will answer 410 for good and is never reused. This cannot be undone.`));
  const yes = el('button', { type: 'button', class: 'danger' }, `Delete ${code}`);
  const no = el('button', { type: 'button', class: 'secondary' }, 'Keep it');
  dialog.append(el('div', { class: 'actions' }, no, yes));
  yes.addEventListener('click', () => { dialog.close(); dialog.remove(); onYes(); });
  no.addEventListener('click', () => { dialog.close(); dialog.remove(); });
  dialog.addEventListener('cancel', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  no.focus();
}

export async function detailPage(code) {
  const enc = encodeURIComponent(code);
  const [link, history] = await Promise.all([get(`/links/${enc}`), get(`/links/${enc}/history`)]);
  const actions = el('div', { class: 'actions' });
  const live = link.state !== 'deleted';
  if (may('links:write') && live) {
    actions.append(el('a', { class: 'button', href: `#/links/${enc}/edit` }, 'Edit'));
    const disabled = link.state === 'disabled';
    const toggle = el('button', { type: 'button', class: 'secondary' }, disabled ? 'Enable' : 'Disable');
    toggle.addEventListener('click', async () => {
      try {
        await request('PATCH', `/links/${enc}`, { body: { disabled: !disabled }, type: 'application/merge-patch+json' });
        notify(disabled ? `${code} redirects again.` : `${code} is disabled: it answers 410.`);
        window.dispatchEvent(new HashChangeEvent('hashchange'));
      } catch (error) {
        notify(error.message, 'error');
      }
    });
    const remove = el('button', { type: 'button', class: 'danger' }, 'Delete');
    remove.addEventListener('click', () => confirmDelete(code, async () => {
      try {
        await request('DELETE', `/links/${enc}`);
        notify(`${code} deleted.`);
        location.hash = '#/links';
      } catch (error) {
        notify(error.message, 'error');
      }
    }));
    actions.append(toggle, remove);
  }
  const page = el('article', { 'aria-labelledby': 'link-title' },
    el('h1', { id: 'link-title', tabindex: -1 }, 'Link ', el('span', { class: 'code' }, link.code)),
    facts(link), actions, await qrSection(code),
    may('stats:read') ? statsSection(code) : null,
    historySection(history.events));
  return [page, () => document.getElementById('link-title')?.focus()];
}
