// Creating a link, and editing one (a JSON merge patch of what changed).

import { get, problem, query, request } from './api.js';
import { checkbox, confirmDialog, el, field, notify } from './dom.js';
import { domainChoice, ownHosts } from './domains.js';
import { linkHash } from './links.js';
import { appTargets, markField, routingChanges, rulesEditor, splitEditor } from './routing.js';
import { campaignEditor, previewEditor } from './sharing.js';

/// Tags typed as `a, b c` -> ['a', 'b', 'c'].
function tagList(text) {
  return text.split(/[\s,]+/).map((t) => t.trim()).filter(Boolean);
}

/// An RFC 3339 time from a `datetime-local` value (the browser's zone), or null.
function isoFrom(local) {
  if (!local) return null;
  const t = new Date(local);
  return Number.isNaN(t.getTime()) ? null : t.toISOString();
}

/// A `datetime-local` value for an RFC 3339 time.
function localFrom(iso) {
  if (!iso) return '';
  const t = new Date(iso);
  const pad = (n) => String(n).padStart(2, '0');
  return `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())}T${pad(t.getHours())}:${pad(t.getMinutes())}`;
}

/// The routing editors of `link` (rules, app targets, split, UTM parameters and the query,
/// preview; `extra` goes under the split, `host()` names the short URL's host on the preview
/// card), the place their refusals are shown, `refresh()` (redraws the card) and `changes()`:
/// the routing fields that differ from the link's, or throws why the form cannot be sent.
function routingEditors(link, extra, host) {
  const rules = rulesEditor(link.rules || []);
  const apps = appTargets(link);
  const split = splitEditor(link.variants || [], extra);
  const campaign = campaignEditor(link);
  const preview = previewEditor(link, host);
  const current = () => ({
    rules: rules.value(), ...apps.value(), variants: split.value(), ...campaign.value(), ...preview.value(),
  });
  const before = current();
  const refusal = el('div', { id: 'form-error', role: 'alert' });
  return {
    nodes: [rules.node, apps.node, split.node, campaign.node, preview.node, refusal],
    refresh: preview.refresh,
    changes() {
      const problem = split.problem();
      if (problem) throw Object.assign(new Error(problem), { field: 'variants[0].weight' });
      return routingChanges(before, current());
    },
    /// Shows `error` (a refusal of the page or the API) next to the form and marks its field.
    show(form, error) {
      const text = problem(error);
      refusal.replaceChildren(el('p', { class: 'refusal' }, text));
      notify(text, 'error');
      const marked = markField(form, error.field || error.message);
      (marked || refusal).scrollIntoView({ block: 'nearest' });
    },
    clear() { refusal.replaceChildren(); },
  };
}

/// The form of a new link, on the default domain or one of the tenant's.
export async function createPage() {
  const [domain, domainField] = domainChoice(await ownHosts());
  const url = el('input', { type: 'url', required: true, placeholder: 'https://example.com/landing' });
  const alias = el('input', { type: 'text', pattern: '[A-Za-z0-9_\\-]+', maxlength: 64 });
  const expires = el('input', { type: 'datetime-local' });
  const tags = el('input', { type: 'text', placeholder: 'spring, promo' });
  const maxVisits = el('input', { type: 'number', min: 1 });
  const password = el('input', { type: 'password', autocomplete: 'new-password', maxlength: 256 });
  const priv = checkbox('Private: an unguessable 16-character code');
  const routing = routingEditors({}, null, () => domain.value || location.host);
  domain.addEventListener('change', routing.refresh);
  const form = el('form', { 'aria-labelledby': 'create-title' },
    el('h1', { id: 'create-title' }, 'New link'),
    field('Target URL', url),
    domainField,
    field('Alias', alias, 'Optional. Letters, digits, - and _; with only letters and digits it must be shorter than a generated code.'),
    field('Expires', expires, 'Optional. The link answers 410 from then on.'),
    field('Tags', tags, 'Optional. Up to 20, separated by commas or spaces: a-z, 0-9, ., _ and -.'),
    field('Visit limit', maxVisits, 'Optional. After this many visits by people the link answers 410.'),
    field('Password', password, 'Optional. Visitors must type it before they are sent on.'),
    priv.node,
    routing.nodes,
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Create')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = { url: url.value.trim(), tags: tagList(tags.value) };
    if (domain.value) body.domain = domain.value;
    if (alias.value.trim()) body.alias = alias.value.trim();
    if (expires.value) body.expires_at = isoFrom(expires.value);
    if (maxVisits.value) body.max_visits = Number(maxVisits.value);
    if (password.value) body.password = password.value;
    if (priv.box.checked) body.private = true;
    try {
      Object.assign(body, routing.changes());
      routing.clear();
      const link = await request('POST', '/links', { body });
      notify(`Created ${link.short_url}`);
      location.hash = linkHash(link.code, body.domain ? link.domain : null);
    } catch (error) {
      routing.show(form, error);
    }
  });
  return [form, () => url.focus()];
}

/// Ending `link`'s split: a winner among its variants becomes the target, and the split goes
/// (one patch: `{"url": winner, "variants": null}`).
function endSplit(link, domain) {
  const winner = el('select', {}, link.variants.map((v) => el('option', { value: v.url }, `${v.url} (${v.weight}%)`)));
  const end = el('button', { type: 'button', class: 'danger' }, 'End split');
  end.addEventListener('click', () => confirmDialog('End the split?',
    `Every visit not routed otherwise goes to ${winner.value}, which becomes the link's target.`,
    'End the split', 'Keep it', async () => {
      try {
        await request('PATCH', `/links/${encodeURIComponent(link.code)}${query({ domain })}`,
          { body: { url: winner.value, variants: null }, type: 'application/merge-patch+json' });
        notify(`Split ended: ${winner.value} is the target.`);
        location.hash = linkHash(link.code, domain);
      } catch (error) {
        notify(problem(error), 'error');
      }
    }));
  return el('div', { class: 'row end-split' }, field('Winner', winner, 'Ending the split makes the winner the target.'), end);
}

/// The edit form of the link `code` (on the branded domain `domain`, if any).
export async function editPage(code, domain) {
  const on = query({ domain });
  const link = await get(`/links/${encodeURIComponent(code)}${on}`);
  const url = el('input', { type: 'url', required: true, value: link.url });
  const expires = el('input', { type: 'datetime-local', value: localFrom(link.expires_at) });
  const tags = el('input', { type: 'text', value: (link.tags || []).join(', ') });
  const maxVisits = el('input', { type: 'number', min: 1, value: link.max_visits ?? '' });
  const password = el('input', { type: 'password', autocomplete: 'new-password', maxlength: 256 });
  const clearPassword = checkbox('Remove the password');
  const routing = routingEditors(link, (link.variants || []).length ? endSplit(link, domain) : null,
    () => new URL(link.short_url).host);
  const form = el('form', { 'aria-labelledby': 'edit-title' },
    el('h1', { id: 'edit-title' }, 'Edit ', el('span', { class: 'code' }, link.code)),
    field('Target URL', url, 'A new target is recorded in the link\'s history.'),
    field('Expires', expires, 'Empty: never.'),
    field('Tags', tags),
    field('Visit limit', maxVisits, 'Empty: none.'),
    field('New password', password, link.protected ? 'The link has a password; leave empty to keep it.' : 'Optional.'),
    link.protected ? clearPassword.node : null,
    routing.nodes,
    el('div', { class: 'actions' },
      el('button', { type: 'submit' }, 'Save'),
      el('a', { class: 'button secondary', href: linkHash(link.code, domain) }, 'Cancel')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const patch = {};
    if (url.value.trim() !== link.url) patch.url = url.value.trim();
    const newExpiry = isoFrom(expires.value);
    if (localFrom(link.expires_at) !== expires.value) patch.expires_at = newExpiry;
    const newTags = tagList(tags.value);
    if (newTags.join(',') !== (link.tags || []).join(',')) patch.tags = newTags;
    const limit = maxVisits.value ? Number(maxVisits.value) : null;
    if (limit !== (link.max_visits ?? null)) patch.max_visits = limit;
    if (password.value) patch.password = password.value;
    else if (clearPassword.box.checked) patch.password = null;
    try {
      Object.assign(patch, routing.changes());
      routing.clear();
      await request('PATCH', `/links/${encodeURIComponent(link.code)}${on}`, { body: patch, type: 'application/merge-patch+json' });
      notify('Saved.');
      location.hash = linkHash(link.code, domain);
    } catch (error) {
      routing.show(form, error);
    }
  });
  return [form, () => url.focus()];
}
