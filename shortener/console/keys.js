// Keys: the API keys of the signed-in key's tenant made through the API (`keys:manage`). Make
// one (its secret shown once, on this page only), list them with their last use and the scopes
// each holds now, revoke one.
// The keys file's keys are the operator's and are not shown here.

import { get, problem, request } from './api.js';
import { checkbox, confirmDialog, el, field, notify, time } from './dom.js';
import { may, session } from './app.js';

/// The scopes a new key may get: those the signed-in key holds (`admin` holds every one).
function grantable() {
  const all = ['links:create', 'links:read', 'links:write', 'stats:read', 'keys:manage', 'audit:read', 'admin'];
  return all.filter((scope) => may(scope));
}

/// The secret of the key just made, shown until the page is left; never stored anywhere.
function secretBox(created) {
  const value = el('input', { type: 'text', readonly: true, class: 'code', value: created.secret, 'aria-label': `Secret of ${created.name}` });
  const copy = el('button', { type: 'button', class: 'secondary' }, 'Copy');
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(created.secret);
      notify('Copied.');
    } catch {
      value.select();
    }
  });
  const token = created.yourls_token
    ? [el('p', {}, 'Its YOURLS token, for tools that sign YOURLS requests with timestamps (also shown this once):'),
      el('input', { type: 'text', readonly: true, class: 'code', id: 'new-yourls-token', value: created.yourls_token, 'aria-label': `YOURLS token of ${created.name}` })]
    : [];
  return el('div', { role: 'alert', class: 'field', id: 'new-secret' },
    el('p', {}, `The secret of ${created.name}. It is shown this once: copy it now.`),
    el('div', { class: 'row' }, value, copy),
    ...token);
}

/// A key's scopes as they are in force: a key a signed-in person made carries at most what
/// that person's role grants now (`scopes_in_force`); none is in force when the role is gone,
/// or when a key of the operator's keys file has taken its name.
function scopesCell(key) {
  const granted = key.scopes.join(', ');
  const held = key.scopes_in_force;
  const same = held && held.length === key.scopes.length && held.every((s) => key.scopes.includes(s));
  if (same) return el('td', { class: 'scopes' }, granted);
  if (!held) {
    return el('td', { class: 'scopes' }, el('span', { class: 'state' }, 'not in force'),
      el('div', { class: 'hint' }, `Refused as unknown: its maker's role no longer grants it, or a key of the keys file has its name. Made with ${granted}.`));
  }
  return el('td', { class: 'scopes' }, held.length ? held.join(', ') : 'none',
    el('div', { class: 'hint' }, `Capped by its maker's role; made with ${granted}.`));
}

function keyRow(key, reload) {
  const revoke = el('button', { type: 'button', class: 'danger', 'aria-label': `Revoke ${key.name}` }, 'Revoke');
  revoke.addEventListener('click', () => confirmDialog(`Revoke ${key.name}?`,
    'Requests with this key are refused on every node within the reload interval. This cannot be undone.',
    'Revoke', 'Keep', async () => {
      try {
        await request('DELETE', `/keys/${encodeURIComponent(key.name)}`);
        notify(`${key.name} revoked.`);
        await reload();
      } catch (error) {
        notify(problem(error), 'error');
      }
    }));
  return el('tr', {}, el('td', { class: 'code' }, key.name), scopesCell(key),
    el('td', {}, time(key.created_at)), el('td', {}, key.created_by), el('td', {}, key.expires_at ? time(key.expires_at) : 'never'),
    el('td', {}, key.last_used_at ? time(key.last_used_at) : 'not yet'), el('td', {}, revoke));
}

function createForm(secretSlot, reload) {
  const name = el('input', { type: 'text', required: true, maxlength: 64, pattern: '[A-Za-z0-9][A-Za-z0-9_.\\-]{0,63}', spellcheck: 'false' });
  const expires = el('input', { type: 'datetime-local' });
  const boxes = grantable().map((scope) => checkbox(scope, { value: scope, checked: scope === 'links:read' }));
  const form = el('form', { 'aria-label': 'Make a key' },
    field('Name', name, 'Letters, digits, _, . and -; unique in the tenant.'),
    el('fieldset', {}, el('legend', {}, 'Scopes (at most those of your own key)'), boxes.map((b) => b.node)),
    field('Expires', expires, 'Optional; your local time.'),
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Make key')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = { name: name.value.trim(), scopes: boxes.filter((b) => b.box.checked).map((b) => b.box.value) };
    if (expires.value) body.expires_at = new Date(expires.value).toISOString();
    try {
      const created = await request('POST', '/keys', { body });
      secretSlot.replaceChildren(secretBox(created));
      form.reset();
      await reload();
    } catch (error) {
      notify(problem(error), 'error');
    }
  });
  return form;
}

export async function keysPage() {
  if (!may('keys:manage')) return [el('p', { role: 'alert' }, 'This page needs a key with keys:manage.')];
  const rows = el('tbody', { id: 'keys' });
  const secretSlot = el('div');
  async function reload() {
    const result = await get('/keys');
    rows.replaceChildren(...result.keys.map((key) => keyRow(key, reload)));
    if (!result.keys.length) rows.append(el('tr', {}, el('td', { colspan: 7, class: 'hint' }, 'No keys made here yet.')));
  }
  await reload();
  return [el('section', { 'aria-labelledby': 'keys-title' },
    el('h1', { id: 'keys-title' }, `API keys of ${session.me.tenant}`),
    el('p', { class: 'hint' }, 'Keys of the operator\'s keys file are managed there and not listed.'),
    secretSlot,
    el('table', {}, el('thead', {}, el('tr', {}, ['Name', 'Scopes', 'Created', 'By', 'Expires', 'Last used', ''].map((h) => el('th', { scope: 'col' }, h)))), rows),
    el('h2', {}, 'Make a key'),
    createForm(secretSlot, reload))];
}
