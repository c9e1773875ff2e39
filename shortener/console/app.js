// The console: sign in with an API key, then links, a link's detail, create, import, domains,
// keys and admin pages, routed by the URL's fragment (`#/links/CODE?domain=HOST`: a query after the
// path names a branded domain or a list filter).

import { ApiError, get, key, setKey } from './api.js';
import { clear, el, field, hideNotice, notify } from './dom.js';
import { linksPage } from './links.js';
import { detailPage } from './detail.js';
import { createPage, editPage } from './editor.js';
import { importPage } from './importer.js';
import { adminPage } from './admin.js';
import { domainPage, domainsPage } from './domains.js';
import { keysPage } from './keys.js';

const main = document.getElementById('main');
export const session = { me: null };

/// Whether the signed-in key grants `scope` (`admin` grants every scope).
export function may(scope) {
  const scopes = session.me ? session.me.scopes : [];
  return scopes.includes('admin') || scopes.includes(scope);
}

function signInPage() {
  const input = el('input', { type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const form = el('form', { 'aria-labelledby': 'sign-in-title' },
    el('h1', { id: 'sign-in-title' }, 'Sign in'),
    field('API key', input, 'Kept in this tab only (sessionStorage), sent as the bearer token, gone when the tab closes.'),
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Sign in')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    setKey(input.value.trim());
    try {
      await loadMe();
      location.hash = '#/links';
      route();
    } catch (error) {
      setKey(null);
      notify(error.status === 401 ? 'That key is not accepted.' : error.message, 'error');
    }
  });
  return [form, () => input.focus()];
}

async function loadMe() {
  session.me = await get('/me');
  document.getElementById('who').textContent = `${session.me.tenant} / ${session.me.key}`;
  document.getElementById('sign-out').hidden = false;
  const nav = document.getElementById('nav');
  nav.hidden = false;
  for (const link of nav.querySelectorAll('[data-scope]')) link.hidden = !may(link.dataset.scope);
}

function signOut() {
  setKey(null);
  session.me = null;
  document.getElementById('who').textContent = '';
  document.getElementById('sign-out').hidden = true;
  document.getElementById('nav').hidden = true;
  location.hash = '';
  route();
}

const routes = [
  [/^#\/links\/([A-Za-z0-9_-]+)\/edit$/, (m, p) => editPage(decodeURIComponent(m[1]), p.get('domain'))],
  [/^#\/links\/([A-Za-z0-9_-]+)$/, (m, p) => detailPage(decodeURIComponent(m[1]), p.get('domain'))],
  [/^#\/new$/, () => createPage()],
  [/^#\/import$/, () => importPage()],
  [/^#\/domains\/([^/]+)$/, (m) => domainPage(decodeURIComponent(m[1]))],
  [/^#\/domains$/, () => domainsPage()],
  [/^#\/keys$/, () => keysPage()],
  [/^#\/admin$/, () => adminPage()],
  [/^(#\/links)?$/, (m, p) => linksPage({ domain: p.get('domain') })],
];

let generation = 0;
export async function route() {
  const mine = ++generation;
  hideNotice();
  let view;
  if (!key()) {
    view = signInPage();
  } else {
    if (!session.me) {
      try {
        await loadMe();
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) return signOut();
        notify(error.message, 'error');
        return;
      }
    }
    const [hash, search] = (location.hash || '#/links').split('?', 2);
    const found = routes.find(([pattern]) => pattern.test(hash));
    const make = found ? found[1] : () => [el('p', {}, 'No such page.')];
    try {
      view = await make(found ? hash.match(found[0]) : null, new URLSearchParams(search || ''));
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) return signOut();
      view = [el('p', { role: 'alert' }, error.message)];
    }
  }
  if (mine !== generation) return;
  const [node, focus] = Array.isArray(view) ? view : [view];
  clear(main).append(node);
  for (const link of document.querySelectorAll('#nav a')) {
    const current = (location.hash || '#/links').startsWith(link.getAttribute('href'));
    if (current) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  }
  if (focus) focus(); else main.focus();
}

document.getElementById('sign-out').addEventListener('click', signOut);
window.addEventListener('hashchange', route);
route();
