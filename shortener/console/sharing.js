// How a link travels: the UTM parameters added to its targets, whether the short URL's own
// query is passed on, and the social preview that link-preview crawlers are shown, with a
// card of how the link looks when shared. Every value the user typed is set as text.

import { checkbox, el, field } from './dom.js';

/// The UTM fields: API name, label, placeholder.
const UTM = [
  ['utm_source', 'UTM source', 'newsletter'],
  ['utm_medium', 'UTM medium', 'email'],
  ['utm_campaign', 'UTM campaign', 'spring_sale'],
  ['utm_term', 'UTM term', ''],
  ['utm_content', 'UTM content', ''],
];

/// A text input for the API field `name`, holding `value`.
function input(name, value, attrs = {}) {
  return el('input', { type: 'text', value: value || '', spellcheck: 'false', 'data-field': name, ...attrs });
}

/// The UTM inputs and the pass-the-query checkbox of `link`: the fieldset and `value()`, the
/// fields as the API takes them (null for an empty one).
export function campaignEditor(link = {}) {
  const inputs = UTM.map(([name, , placeholder]) => input(name, link[name], { placeholder, maxlength: 200 }));
  const pass = checkbox('Pass the query on: a visit\'s own query parameters (?ref=...) are added to the target',
    { 'data-field': 'pass_query', checked: Boolean(link.pass_query) });
  const node = el('fieldset', { class: 'routing' }, el('legend', {}, 'Campaign'),
    el('p', { class: 'hint' }, 'UTM parameters are added to every web target of the link (rules and split included) '
      + 'that does not set them itself. Up to 200 bytes each, without &, =, # or ?. Empty: none.'),
    el('div', { class: 'row utm' }, UTM.map(([, label], i) => field(label, inputs[i]))),
    pass.node);
  const value = () => {
    const out = {};
    UTM.forEach(([name], i) => { out[name] = inputs[i].value.trim() || null; });
    out.pass_query = pass.box.checked;
    return out;
  };
  return { node, value };
}

/// What the card says of an image URL: its host and path, never loaded (the console's policy
/// loads images from its own origin only, and fetching it would tell the image's host who
/// looks).
function imageText(text) {
  if (!text) return 'No image';
  try {
    const url = new URL(text);
    return `Image: ${url.host}${url.pathname}`;
  } catch {
    return `Image: ${text}`;
  }
}

/// The preview inputs of `link` (title, description, image) and a card of how the link looks
/// when shared, on the host `host()` names: the fieldset and `value()`, the fields as the API
/// takes them (null for an empty one). `refresh()` redraws the card (when the host changes).
export function previewEditor(link = {}, host = () => location.host) {
  const title = input('title', link.title, { maxlength: 200 });
  const description = el('textarea', { rows: 2, maxlength: 500, 'data-field': 'description' });
  description.value = link.description || '';
  const image = input('image', link.image, { type: 'url', placeholder: 'https://example.com/card.png' });
  const shown = {
    image: el('div', { class: 'preview-image', id: 'preview-image' }),
    host: el('div', { class: 'preview-host', id: 'preview-host' }),
    title: el('div', { class: 'preview-title', id: 'preview-title' }),
    description: el('div', { class: 'preview-description', id: 'preview-description' }),
    note: el('p', { class: 'hint', id: 'preview-note', 'aria-live': 'polite' }),
  };
  function refresh() {
    const any = [title, description, image].some((i) => i.value.trim());
    shown.image.textContent = imageText(image.value.trim());
    shown.host.textContent = host();
    shown.title.textContent = title.value.trim();
    shown.description.textContent = description.value.trim();
    shown.note.textContent = any
      ? 'Crawlers (Slack, X, Facebook, ...) are shown this instead of the target\'s own preview.'
      : 'No preview set: crawlers follow the redirect and show the target\'s own.';
  }
  for (const i of [title, description, image]) i.addEventListener('input', refresh);
  const card = el('figure', { class: 'preview-card', id: 'preview-card', 'aria-label': 'How the link looks when shared' },
    shown.image, el('figcaption', { class: 'preview-text' }, shown.host, shown.title, shown.description));
  refresh();
  const node = el('fieldset', { class: 'routing' }, el('legend', {}, 'Social preview'),
    field('Preview title', title, 'Up to 200 characters.'),
    field('Preview description', description, 'Up to 500 characters.'),
    field('Preview image URL', image, 'An http(s) URL, checked as a target is.'),
    card, shown.note);
  const value = () => ({
    title: title.value.trim() || null,
    description: description.value.trim() || null,
    image: image.value.trim() || null,
  });
  return { node, value, refresh };
}
