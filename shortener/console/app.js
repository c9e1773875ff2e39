// The console: sign in with an API key or through the identity provider (a session the node
// keeps), then links, a link's detail, create, import, domains,
// keys and admin pages, routed by the URL's fragment (`#/links/CODE?domain=HOST`: a query after the
// path names a branded domain or a list filter).

import { ApiError, consoleRequest, get, key, setCsrf, setKey, signedInWithSession } from './api.js';
import { clear, el, field, hideNotice, notify } from './dom.js';
import { linksPage } from './links.js';
import { detailPage } from './detail.js';
import { createPage, editPage } from './editor.js';
import { importPage } from './importer.js';
import { adminPage } from './admin.js';
import { domainPage, domainsPage } from './domains.js';
import { keysPage } from './keys.js';

const main = document.getElementById('main');
export const session = { me: null, person: null, oidc: false };

/// Whether the signed-in key grants `scope` (`admin` grants every scope).
export function may(scope) {
  const scopes = session.me ? session.me.scopes : [];
  return scopes.includes('admin') || scopes.includes(scope);
}

function signInPage() {
  const single = session.oidc
    ? el('p', { class: 'actions' }, el('a', { class: 'button', href: '/console/oidc/login' }, 'Sign in with single sign-on'))
    : null;
  const input = el('input', { type: 'password', autocomplete: 'off', required: true, spellcheck: 'false' });
  const form = el('form', { 'aria-labelledby': 'sign-in-title' },
    el('h1', { id: 'sign-in-title' }, 'Sign in'),
    single,
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

/// Whether the node offers single sign-on, and who is signed in through it (the session's
/// anti-CSRF token goes to every request that changes something).
async function loadPerson() {
  let answer = { oidc: false };
  try {
    answer = await consoleRequest('GET', '/console/session');
  } catch { /* an older node, or the console without sign-on */ }
  session.oidc = answer.oidc === true;
  session.person = answer.signed_in ? answer : null;
  setCsrf(session.person ? session.person.csrf : null);
}

/// The signed-in person's name, and a switcher among the tenants they hold a role in.
function showPerson() {
  const who = clear(document.getElementById('who'));
  const person = session.person;
  const name = person.name ? `${person.name} (${person.email || person.subject})` : (person.email || person.subject);
  who.append(el('span', { id: 'person' }, name));
  if (person.tenants.length > 1) {
    const select = el('select', { id: 'tenant', 'aria-label': 'Tenant' },
      person.tenants.map((t) => el('option', { value: t.tenant, selected: t.tenant === person.tenant }, `${t.tenant} (${t.role})`)));
    select.addEventListener('change', async () => {
      try {
        await consoleRequest('POST', '/console/session/tenant', { tenant: select.value });
        session.me = null;
        await loadPerson();
        route();
      } catch (error) {
        notify(error.message, 'error');
      }
    });
    who.append(' ', select);
  } else if (person.tenant) {
    const role = person.tenants.find((t) => t.tenant === person.tenant);
    who.append(' ', el('span', { id: 'tenant' }, `${person.tenant} (${role ? role.role : ''})`));
  }
}

/// What a signed-in person with no role in any tenant sees.
function noRolePage() {
  return el('section', { 'aria-labelledby': 'no-role-title' },
    el('h1', { id: 'no-role-title' }, 'No access yet'),
    el('p', {}, `You are signed in as ${session.person.email || session.person.subject}, but no tenant of this deployment gives you a role.`),
    el('p', {}, 'Ask an administrator to map one of your groups to a tenant in the roles file, then reload this page.'));
}

async function loadMe() {
  session.me = await get('/me');
  if (signedInWithSession()) {
    showPerson();
  } else {
    document.getElementById('who').textContent = `${session.me.tenant} / ${session.me.key}`;
  }
  document.getElementById('sign-out').hidden = false;
  const nav = document.getElementById('nav');
  nav.hidden = false;
  for (const link of nav.querySelectorAll('[data-scope]')) link.hidden = !may(link.dataset.scope);
}

async function signOut() {
  if (signedInWithSession()) {
    try {
      const answer = await consoleRequest('POST', '/console/oidc/logout');
      setCsrf(null);
      session.person = null;
      location.assign(answer.next);
      return;
    } catch (error) {
      notify(error.message, 'error');
    }
  }
  setCsrf(null);
  session.person = null;
  setKey(null);
  session.me = null;
  document.getElementById('who').textContent = '';
  document.getElementById('sign-out').hidden = true;
  document.getElementById('nav').hidden = true;
  location.hash = '';
  route();
}

/// The key or session stopped working: back to the sign-in page.
function signedOut() {
  setCsrf(null);
  session.person = null;
  setKey(null);
  session.me = null;
  clear(document.getElementById('who'));
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
  if (!key() && !session.person) await loadPerson();
  if (mine !== generation) return;
  if (!key() && session.person && session.person.tenants.length === 0) {
    showPerson();
    document.getElementById('sign-out').hidden = false;
    view = noRolePage();
  } else if (!key() && !session.person) {
    view = signInPage();
  } else {
    if (!session.me) {
      try {
        await loadMe();
      } catch (error) {
        if (error instanceof ApiError && error.status === 401) return signedOut();
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
      if (error instanceof ApiError && error.status === 401) return signedOut();
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
