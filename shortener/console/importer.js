// Importing a CSV or NDJSON file: the per-row results as they stream back, then a summary and a
// download of every result.

import { lines, problem, query, request } from './api.js';
import { checkbox, download, el, field, notify } from './dom.js';
import { domainChoice, ownHosts } from './domains.js';

export async function importPage() {
  const [domain, domainField] = domainChoice(await ownHosts(), '', 'Each row\'s own domain',
    'Each row goes on the domain its domain column names (one your tenant has claimed; empty: the default domain); a domain chosen here takes every row.');
  const defaults = el('input', { type: 'text', name: 'default_hosts', placeholder: 'old.example' });
  // A domain chosen for every row leaves the rows' domains unread, and the hosts with them.
  const onlyOwn = () => { defaults.disabled = domain.value !== ''; };
  domain.addEventListener('change', onlyOwn);
  onlyOwn();
  const file = el('input', { type: 'file', accept: '.csv,.ndjson,.jsonl,text/csv,application/x-ndjson', required: true });
  const dry = checkbox('Dry run: check every row, store nothing');
  const summary = el('p', { 'aria-live': 'polite', id: 'import-summary' });
  const body = el('tbody');
  const saveButton = el('button', { type: 'button', class: 'secondary', hidden: true }, 'Download results');
  let results = [];
  saveButton.addEventListener('click', () => download('import-results.ndjson',
    results.map((r) => JSON.stringify(r)).join('\n') + '\n', 'application/x-ndjson'));
  const form = el('form', { 'aria-labelledby': 'import-title' },
    el('h1', { id: 'import-title' }, 'Import links'),
    field('File', file, 'CSV with a header row (url, code, tags, expires_at, created_at, domain; the exports of Bitly, Shlink and YOURLS work as they are), or NDJSON, one link per line.'),
    domainField,
    field('Default hosts of the file', defaults, 'Optional: the hosts that were the default domain where the rows come from (comma-separated); rows naming them go on this default domain.'),
    dry.node,
    el('div', { class: 'actions' }, el('button', { type: 'submit' }, 'Import'), saveButton));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const chosen = file.files[0];
    if (!chosen) return;
    const csv = /\.csv$/i.test(chosen.name) || chosen.type === 'text/csv';
    body.replaceChildren();
    results = [];
    summary.textContent = 'Importing…';
    saveButton.hidden = true;
    try {
      const params = query({ domain: domain.value, default_hosts: defaults.disabled ? null : defaults.value.trim(), dry_run: dry.box.checked ? 'true' : null });
      const response = await request('POST', `/links/import${params}`, {
        body: chosen, type: csv ? 'text/csv' : 'application/x-ndjson', raw: true,
      });
      await lines(response, (line) => {
        results.push(line);
        if (line.summary) {
          const s = line.summary;
          summary.textContent = `${s.rows} rows: ${s.dry_run ? `${s.valid} valid` : `${s.created} created`}, ${s.exists} already there, ${s.errors} refused.`
            + (s.stopped ? ` Stopped: ${s.stopped.message}` : '');
          return;
        }
        body.append(el('tr', { class: line.status },
          el('td', {}, String(line.row)),
          el('td', { class: 'code' }, line.code ?? ''),
          el('td', {}, line.status),
          el('td', {}, line.error ? `${line.error}: ${line.message}` : '')));
      });
      saveButton.hidden = false;
    } catch (error) {
      summary.textContent = '';
      notify(problem(error), 'error');
    }
  });
  const table = el('table', { class: 'results' },
    el('thead', {}, el('tr', {}, ['Row', 'Code', 'Status', 'Error'].map((h) => el('th', { scope: 'col' }, h)))),
    body);
  return [el('section', {}, form, summary, table), () => file.focus()];
}
