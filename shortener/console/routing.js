// Where a link routes besides its target: the rules editor (an ordered list of targets, each
// with the conditions a visit must meet), the app targets (iOS, Android) and the split editor
// (variants with weights summing to 100), and the same routing told read-only on a link's page.

import { clear, el, field } from './dom.js';
import { session } from './app.js';

/// Condition types, and the choices of those that have a fixed set.
const CHOICES = {
  device: ['desktop', 'mobile', 'tablet'],
  os: ['ios', 'android', 'windows', 'macos', 'linux', 'chromeos'],
  browser: ['chrome', 'firefox', 'safari', 'edge', 'opera', 'samsung'],
};
const TYPES = ['device', 'os', 'browser', 'language', 'country', 'query', 'before', 'after', 'cidr'];
const HINTS = {
  language: 'de, pt-BR', country: 'DE', before: '2027-01-01T00:00:00Z', after: '2027-01-01T00:00:00Z',
  cidr: '10.0.0.0/8', query: 'empty: present; a, b: one of',
};
const MAX_CONDITIONS = 8;

/// The condition types to offer: those this node takes (`/me`; `country` only where it has a
/// GeoIP database), and a condition's own type if the link already has one the node does not.
function conditionTypes(current) {
  const offered = TYPES.filter((t) => !session.me?.rule_conditions || session.me.rule_conditions.includes(t));
  return offered.includes(current) ? offered : [...offered, current];
}

/// A condition in words: `device is mobile`, `query src is one of a, b`.
export function conditionText(c) {
  if (c.type === 'query') {
    const value = c.value ?? (c.values && c.values.length ? c.values : null);
    if (value === null || (Array.isArray(value) && !value.length)) return `query ${c.key} is present`;
    if (Array.isArray(value) && value.length > 1) return `query ${c.key} is one of ${value.join(', ')}`;
    return `query ${c.key} = ${value}`;
  }
  if (c.type === 'before' || c.type === 'after') return `${c.type} ${c.value}`;
  if (c.type === 'cidr') return `address in ${c.value}`;
  return `${c.type} is ${c.value}`;
}

/// A rule in words: `device is mobile and os is ios -> URL`.
export function ruleText(rule) {
  const to = rule.variants?.length ? `split ${splitText(rule.variants)}` : rule.url;
  return `${(rule.conditions || []).map(conditionText).join(' and ')} -> ${to}`;
}

/// A split in words: `50% URL, 50% URL`.
export function splitText(variants) {
  return variants.map((v) => `${v.weight}% ${v.url}`).join(', ');
}

/// The link's routing, read-only: rules in order, app targets, the split with its weights, the
/// UTM parameters and whether the query is passed on, the social preview.
export function routingSection(link) {
  const rules = link.rules || [];
  const variants = link.variants || [];
  const parts = [];
  if (rules.length) {
    parts.push(el('h3', {}, 'Rules'), el('p', { class: 'hint' }, 'The first rule whose conditions all hold decides.'),
      el('ol', { id: 'rules', class: 'routes' }, rules.map((rule) => el('li', {},
        el('ul', { class: 'conditions' }, rule.conditions.map((c) => el('li', {}, conditionText(c)))),
        el('div', {}, '-> ', el('span', { class: 'url' },
          rule.variants?.length ? `split ${splitText(rule.variants)}` : rule.url))))));
  }
  const row = (name, value) => (value ? [el('dt', {}, name), el('dd', { class: 'url' }, value)] : null);
  if (link.ios || link.android) {
    parts.push(el('h3', {}, 'App targets'),
      el('dl', { id: 'app-targets', class: 'facts' }, row('iOS', link.ios), row('Android', link.android)));
  }
  if (variants.length) {
    parts.push(el('h3', {}, 'Split'), el('table', { id: 'variants' },
      el('thead', {}, el('tr', {}, el('th', { scope: 'col' }, 'Weight'), el('th', { scope: 'col' }, 'URL'))),
      el('tbody', {}, variants.map((v) => el('tr', {}, el('td', {}, `${v.weight}%`), el('td', { class: 'url' }, v.url))))));
  }
  const utm = ['utm_source', 'utm_medium', 'utm_campaign', 'utm_term', 'utm_content'].filter((n) => link[n]);
  if (utm.length || link.pass_query) {
    parts.push(el('h3', {}, 'Campaign'), el('dl', { id: 'campaign', class: 'facts' },
      utm.map((n) => row(n, link[n])), link.pass_query ? row('Query', 'passed on to the target') : null));
  }
  if (link.title || link.description || link.image) {
    parts.push(el('h3', {}, 'Social preview'), el('dl', { id: 'preview', class: 'facts' },
      row('Title', link.title), row('Description', link.description), row('Image', link.image)));
  }
  if (!parts.length) parts.push(el('p', { class: 'hint', id: 'no-routing' }, 'No rules, app targets or split: every visit goes to the target.'));
  return el('section', { 'aria-labelledby': 'routing-title' }, el('h2', { id: 'routing-title' }, 'Routing'), parts);
}

/// A condition as the form holds it: the value as text (a query's list comma-separated).
function conditionDraft(c) {
  const value = Array.isArray(c.value) ? c.value.join(', ') : (c.value ?? '');
  return { type: c.type, key: c.key ?? '', value };
}

/// A condition as the API takes it.
function conditionValue(c) {
  if (c.type !== 'query') return { type: c.type, value: c.value.trim() };
  const values = c.value.split(',').map((v) => v.trim()).filter(Boolean);
  const out = { type: 'query', key: c.key.trim() };
  if (values.length === 1) [out.value] = values;
  else if (values.length > 1) out.value = values;
  return out;
}

/// A button that calls `onClick`; `label` names it for screen readers when its text is short.
function button(text, onClick, { label, disabled, kind = 'secondary' } = {}) {
  const b = el('button', { type: 'button', class: kind, 'aria-label': label, disabled }, text);
  b.addEventListener('click', onClick);
  return b;
}

function conditionRow(rule, r, c, i, redraw) {
  const where = `rules[${r}].conditions[${i}]`;
  const name = `Rule ${r + 1}, condition ${i + 1}`;
  const type = el('select', { 'data-field': `${where}.type` },
    conditionTypes(c.type).map((t) => el('option', { value: t, selected: t === c.type }, t)));
  type.addEventListener('change', () => {
    c.type = type.value;
    if (CHOICES[c.type]) c.value = CHOICES[c.type].includes(c.value) ? c.value : CHOICES[c.type][0];
    redraw();
  });
  let value;
  if (CHOICES[c.type]) {
    value = el('select', {}, CHOICES[c.type].map((v) => el('option', { value: v, selected: v === c.value }, v)));
    value.addEventListener('change', () => { c.value = value.value; });
  } else {
    value = el('input', { type: 'text', value: c.value, placeholder: HINTS[c.type], spellcheck: 'false' });
    value.addEventListener('input', () => { c.value = value.value; });
  }
  value.setAttribute('data-field', `${where}.value`);
  let key = null;
  if (c.type === 'query') {
    const input = el('input', { type: 'text', value: c.key, spellcheck: 'false', 'data-field': `${where}.key` });
    input.addEventListener('input', () => { c.key = input.value; });
    key = field(`${name} key`, input);
  }
  return el('div', { class: 'row condition' }, field(name, type), key, field(`${name} value`, value),
    button('Remove', () => { rule.conditions.splice(i, 1); redraw(); },
      { label: `Remove rule ${r + 1}, condition ${i + 1}`, disabled: rule.conditions.length < 2 }));
}

function ruleBox(rules, r, redraw) {
  const rule = rules[r];
  const url = el('input', { type: 'url', value: rule.url, spellcheck: 'false', 'data-field': `rules[${r}].url` });
  url.addEventListener('input', () => { rule.url = url.value; });
  // A rule that splits its visits keeps its split as it is (the API edits a rule's split).
  const target = rule.variants
    ? el('p', { class: 'url', 'data-field': `rules[${r}].variants` }, `Split: ${splitText(rule.variants)}`)
    : field(`Rule ${r + 1} URL`, url);
  const move = (to) => () => { rules.splice(to, 0, ...rules.splice(r, 1)); redraw(); };
  return el('fieldset', { class: 'rule' }, el('legend', {}, `Rule ${r + 1}`),
    target,
    rule.conditions.map((c, i) => conditionRow(rule, r, c, i, redraw)),
    el('div', { class: 'actions' },
      button('Add condition', () => { rule.conditions.push({ type: 'device', key: '', value: 'mobile' }); redraw(); },
        { disabled: rule.conditions.length >= MAX_CONDITIONS }),
      button('Move up', move(r - 1), { label: `Move rule ${r + 1} up`, disabled: r === 0 }),
      button('Move down', move(r + 1), { label: `Move rule ${r + 1} down`, disabled: r === rules.length - 1 }),
      button('Remove rule', () => { rules.splice(r, 1); redraw(); }, { label: `Remove rule ${r + 1}`, kind: 'danger' })));
}

/// The rules editor of `initial` (the link's rules): its fieldset and `value()`, the rules as
/// the API takes them.
export function rulesEditor(initial = []) {
  const rules = initial.map((rule) => ({
    url: rule.url || '',
    variants: rule.variants?.length ? rule.variants : undefined,
    conditions: rule.conditions.map(conditionDraft),
  }));
  const list = el('div', { class: 'rules' });
  function redraw() {
    clear(list).append(...rules.map((_, r) => ruleBox(rules, r, redraw)));
  }
  redraw();
  const node = el('fieldset', { class: 'routing' }, el('legend', {}, 'Rules'),
    el('p', { class: 'hint' }, 'Checked in order: the first rule whose conditions all hold sends the visit to its URL; '
      + 'otherwise the app targets, the split and the target URL. A query value left empty means present; '
      + 'a, b means one of them.'),
    list,
    el('div', { class: 'actions' }, button('Add rule', () => {
      rules.push({ url: '', conditions: [{ type: 'device', key: '', value: 'mobile' }] });
      redraw();
      list.lastElementChild?.querySelector('input')?.focus();
    })));
  const value = () => rules.map((rule) => ({
    ...(rule.variants ? { variants: rule.variants } : { url: rule.url.trim() }),
    conditions: rule.conditions.map(conditionValue),
  }));
  return { node, value };
}

/// The app target inputs (`ios`, `android`) of `link`: the fieldset and `value()`, both
/// targets (null for none).
export function appTargets(link = {}) {
  const input = (name, value) => el('input', { type: 'url', value: value || '', spellcheck: 'false', 'data-field': name, placeholder: 'myapp://item/7' });
  const ios = input('ios', link.ios);
  const android = input('android', link.android);
  const node = el('fieldset', { class: 'routing' }, el('legend', {}, 'App targets'),
    el('p', { class: 'hint' }, 'Where iOS and Android visitors go when no rule sent them elsewhere: an app URL or a store link. Empty: none.'),
    field('iOS target', ios), field('Android target', android));
  return { node, value: () => ({ ios: ios.value.trim() || null, android: android.value.trim() || null }) };
}

/// The split editor of `initial` (the link's variants): the fieldset, `value()` (the variants,
/// [] for none) and `problem()` (why the split cannot be sent, or null).
export function splitEditor(initial = [], extra = null) {
  const variants = initial.map((v) => ({ url: v.url, weight: String(v.weight) }));
  const list = el('div', { class: 'variants' });
  const sum = el('p', { id: 'split-sum', class: 'hint', 'aria-live': 'polite' });
  const total = () => variants.reduce((s, v) => s + (Number(v.weight) || 0), 0);
  const problem = () => (variants.length && total() !== 100
    ? `The split's weights sum to ${total()}; they must sum to 100.` : null);
  function tell() {
    sum.textContent = variants.length ? `Weights sum to ${total()}${total() === 100 ? '.' : ' (must be 100).'}` : 'No split.';
    sum.classList.toggle('refusal', Boolean(problem()));
  }
  function redraw() {
    clear(list).append(...variants.map((v, i) => {
      const url = el('input', { type: 'url', value: v.url, spellcheck: 'false', 'data-field': `variants[${i}].url` });
      url.addEventListener('input', () => { v.url = url.value; });
      const weight = el('input', { type: 'number', min: 1, max: 100, step: 1, value: v.weight, 'data-field': `variants[${i}].weight` });
      weight.addEventListener('input', () => { v.weight = weight.value; tell(); });
      return el('div', { class: 'row variant' }, field(`Variant ${i + 1} URL`, url), field(`Variant ${i + 1} weight`, weight),
        button('Remove', () => { variants.splice(i, 1); redraw(); }, { label: `Remove variant ${i + 1}` }));
    }));
    tell();
  }
  redraw();
  const node = el('fieldset', { class: 'routing' }, el('legend', {}, 'Split'),
    el('p', { class: 'hint' }, 'New visitors go to one variant by the weights (2 to 10 variants, percent, summing to 100), and each stays on it.'),
    list, sum,
    el('div', { class: 'actions' }, button('Add variant', () => {
      variants.push({ url: '', weight: '' });
      redraw();
      list.lastElementChild?.querySelector('input')?.focus();
    })), extra);
  const value = () => variants.map((v) => ({ url: v.url.trim(), weight: Number(v.weight) }));
  return { node, value, problem };
}

/// The routing fields of a create body or patch that differ from `before` (a snapshot of the
/// same editors' values when the form was built); an emptied list is sent as null.
export function routingChanges(before, now) {
  const changes = {};
  for (const name of Object.keys(now)) {
    if (JSON.stringify(now[name]) === JSON.stringify(before[name])) continue;
    const empty = Array.isArray(now[name]) && !now[name].length;
    changes[name] = empty ? null : now[name];
  }
  return changes;
}

/// Marks the input an API error names (`rules[0].conditions[1].value: ...`), or the nearest
/// enclosing one it has, and returns it.
export function markField(form, message) {
  for (const old of form.querySelectorAll('[aria-invalid]')) old.removeAttribute('aria-invalid');
  let path = String(message).split(':', 1)[0].trim();
  const inputs = [...form.querySelectorAll('[data-field]')];
  while (path) {
    const found = inputs.find((i) => i.getAttribute('data-field') === path);
    if (found) {
      found.setAttribute('aria-invalid', 'true');
      return found;
    }
    const cut = Math.max(path.lastIndexOf('.'), path.lastIndexOf('['));
    path = cut > 0 ? path.slice(0, cut) : '';
  }
  return null;
}
