// The JSON API, with the key the user pasted (kept in sessionStorage only: gone with the tab),
// or with the sign-in session's cookie (set by the node, HttpOnly): then every request that
// changes something carries the session's anti-CSRF token in X-CSRF-Token.

const KEY = 'shortener.apiKey';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

/// An error as the user reads it: the API's message, with its code when it has one.
export function problem(error) {
  return error.code ? `${error.message} (${error.code})` : error.message;
}

export function key() {
  return sessionStorage.getItem(KEY);
}

export function setKey(value) {
  if (value) sessionStorage.setItem(KEY, value); else sessionStorage.removeItem(KEY);
}

let csrf = null;

/// The anti-CSRF token of the sign-in session (null: none, requests use the pasted key).
export function setCsrf(token) {
  csrf = token || null;
}

export function signedInWithSession() {
  return !key() && csrf !== null;
}

function headers(method) {
  if (key()) return { Authorization: `Bearer ${key()}` };
  return method === 'GET' || method === 'HEAD' || !csrf ? {} : { 'X-CSRF-Token': csrf };
}

/// A console route of the session (`/console/session`, ...), outside the JSON API.
export async function consoleRequest(method, path, body) {
  const init = { method, headers: headers(method), cache: 'no-store', credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) await fail(response);
  return response.status === 204 ? null : response.json();
}

async function fail(response) {
  let body = {};
  try { body = await response.json(); } catch { /* not JSON */ }
  throw new ApiError(response.status, body.error, body.message);
}

export async function request(method, path, { body, type, raw } = {}) {
  const init = { method, headers: headers(method), cache: 'no-store', credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = type || 'application/json';
    init.body = typeof body === 'string' || body instanceof Blob ? body : JSON.stringify(body);
  }
  const response = await fetch(`/api/v1${path}`, init);
  if (!response.ok) await fail(response);
  if (raw) return response;
  if (response.status === 204) return null;
  return response.json();
}

export const get = (path) => request('GET', path);

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const text = q.toString();
  return text ? `?${text}` : '';
}

/// A binary answer (a QR image) as an object URL.
export async function blobUrl(path) {
  const response = await request('GET', path, { raw: true });
  return URL.createObjectURL(await response.blob());
}

/// Streams the NDJSON lines of an answer to `onLine`.
export async function lines(response, onLine) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let rest = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += decoder.decode(value, { stream: true });
    let at;
    while ((at = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, at);
      rest = rest.slice(at + 1);
      if (line.trim()) onLine(JSON.parse(line));
    }
  }
  if (rest.trim()) onLine(JSON.parse(rest));
}
