// Building the page from data without ever parsing data as HTML: every string becomes a text
// node, attributes are set one by one.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      node.addEventListener(name.slice(2), value);
    } else if (value === true) {
      node.setAttribute(name, '');
    } else {
      node.setAttribute(name, String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function svg(tag, attrs = {}) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

let ids = 0;
/// A labelled field: the label names the control, an optional hint describes it.
export function field(label, control, hint) {
  const id = control.id || `f${++ids}`;
  control.id = id;
  const parts = [el('label', { for: id }, label)];
  if (hint) {
    const hintId = `${id}-hint`;
    control.setAttribute('aria-describedby', hintId);
    parts.push(control, el('div', { class: 'hint', id: hintId }, hint));
  } else {
    parts.push(control);
  }
  return el('div', { class: 'field' }, parts);
}

export function checkbox(label, attrs = {}) {
  const box = el('input', { type: 'checkbox', ...attrs });
  return { box, node: el('label', { class: 'check' }, box, label) };
}

export function clear(node) {
  while (node.firstChild) node.firstChild.remove();
  return node;
}

export function time(text) {
  if (!text) return '—';
  const t = new Date(text);
  return Number.isNaN(t.getTime()) ? text : t.toLocaleString();
}

/// A message for the user at the top of the page (role=status, read out by screen readers).
export function notify(message, kind = 'ok') {
  const box = document.getElementById('notice');
  box.textContent = message;
  box.className = `notice ${kind}`;
  box.hidden = false;
  clearTimeout(notify.timer);
  if (kind === 'ok') notify.timer = setTimeout(() => { box.hidden = true; }, 5000);
}

export function hideNotice() {
  document.getElementById('notice').hidden = true;
}

/// Saves `text` as a file named `name`.
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = el('a', { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/// A modal question: `title`, `text`, a `no` button (focused) and a danger `yes` button that
/// closes it and calls `onYes`.
export function confirmDialog(title, text, yes, no, onYes) {
  const dialog = el('dialog', { 'aria-labelledby': 'confirm-title' },
    el('h2', { id: 'confirm-title' }, title), el('p', {}, text));
  const yesButton = el('button', { type: 'button', class: 'danger' }, yes);
  const noButton = el('button', { type: 'button', class: 'secondary' }, no);
  dialog.append(el('div', { class: 'actions' }, noButton, yesButton));
  yesButton.addEventListener('click', () => { dialog.close(); dialog.remove(); onYes(); });
  noButton.addEventListener('click', () => { dialog.close(); dialog.remove(); });
  dialog.addEventListener('cancel', () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
  noButton.focus();
}
