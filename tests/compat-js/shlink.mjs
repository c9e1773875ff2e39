// Drives a node's Shlink dialect (SHORTENER_COMPAT=shlink) with Shlink's own JavaScript SDK,
// @shlinkio/shlink-js-sdk as pinned in package-lock.json, unchanged. Run by the Rust test
// compat_shlink::js_sdk, which starts the node and passes:
//   SHLINK_BASE    the node's base URL (the SDK adds /rest/v3)
//   SHLINK_KEY     an API key of a tenant with every links scope
//   SHLINK_DOMAIN  a branded domain that tenant has claimed
// Prints one line per step; exits non-zero at the first step that fails.
import assert from 'node:assert/strict';
import { ShlinkApiClient } from '@shlinkio/shlink-js-sdk';
import { FetchHttpClient } from '@shlinkio/shlink-js-sdk/fetch';

const base = process.env.SHLINK_BASE;
const apiKey = process.env.SHLINK_KEY;
const domain = process.env.SHLINK_DOMAIN;
assert.ok(base && apiKey && domain, 'SHLINK_BASE, SHLINK_KEY and SHLINK_DOMAIN must be set');

const client = new ShlinkApiClient(new FetchHttpClient(), { baseUrl: base, apiKey });
const step = async (name, run) => {
  await run();
  console.log(`ok ${name}`);
};
const BROWSER = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36';

await step('health', async () => {
  const health = await client.health();
  assert.equal(health.status, 'pass');
  assert.match(health.version, /^4\./);
});

let made;
await step('create with tags and a custom slug', async () => {
  made = await client.createShortUrl({
    longUrl: 'https://example.com/sdk/one',
    customSlug: 'sdk-one',
    tags: ['sdk', 'first'],
    title: 'From the SDK',
    validUntil: '2099-01-01T00:00:00+00:00',
    maxVisits: 50,
  });
  assert.equal(made.shortCode, 'sdk-one');
  assert.deepEqual(made.tags, ['first', 'sdk']);
  assert.equal(made.meta.maxVisits, 50);
  assert.equal(made.meta.validUntil, '2099-01-01T00:00:00+00:00');
  for (let i = 0; i < 3; i += 1) {
    await client.createShortUrl({ longUrl: `https://example.org/sdk/${i}`, tags: ['sdk'] });
  }
});

await step('a taken slug is the SDK error type', async () => {
  await assert.rejects(
    client.createShortUrl({ longUrl: 'https://example.com/again', customSlug: 'sdk-one' }),
    (error) => error.type === 'https://shlink.io/api/error/non-unique-slug' && error.status === 400,
  );
});

await step('list with search and paging', async () => {
  const all = await client.listShortUrls({ itemsPerPage: 3 });
  assert.equal(all.pagination.totalItems, 4);
  assert.equal(all.pagination.pagesCount, 2);
  assert.equal(all.data.length, 3);
  const second = await client.listShortUrls({ itemsPerPage: 3, page: '2' });
  assert.equal(second.data.length, 1);
  assert.equal(second.data[0].shortCode, 'sdk-one');
  const found = await client.listShortUrls({ searchTerm: 'example.com/sdk' });
  assert.deepEqual(found.data.map((u) => u.shortCode), ['sdk-one']);
  const tagged = await client.listShortUrls({ tags: ['first'], orderBy: { field: 'shortCode', dir: 'ASC' } });
  assert.deepEqual(tagged.data.map((u) => u.shortCode), ['sdk-one']);
});

await step('get', async () => {
  const got = await client.getShortUrl({ shortCode: 'sdk-one' });
  assert.equal(got.longUrl, 'https://example.com/sdk/one');
  assert.equal(got.title, 'From the SDK');
});

await step('edit', async () => {
  const edited = await client.updateShortUrl({ shortCode: 'sdk-one' }, {
    longUrl: 'https://example.com/sdk/edited', title: null, tags: ['sdk', 'edited'], maxVisits: null,
  });
  assert.equal(edited.longUrl, 'https://example.com/sdk/edited');
  assert.equal(edited.title, null);
  assert.deepEqual(edited.tags, ['edited', 'sdk']);
  assert.equal(edited.meta.maxVisits, null);
});

await step('visits overview', async () => {
  for (const agent of [BROWSER, BROWSER, 'curl/8.0']) {
    await fetch(`${base}/sdk-one`, { redirect: 'manual', headers: { 'user-agent': agent } });
  }
  let overview;
  for (let tries = 0; tries < 100; tries += 1) {
    overview = await client.getVisitsOverview();
    if (overview.nonOrphanVisits.total === 3) break;
    await new Promise((resolve) => { setTimeout(resolve, 100); });
  }
  assert.deepEqual(overview.nonOrphanVisits, { total: 3, nonBots: 2, bots: 1 });
  assert.deepEqual(overview.orphanVisits, { total: 0, nonBots: 0, bots: 0 });
  const visits = await client.getShortUrlVisits({ shortCode: 'sdk-one' });
  assert.deepEqual(visits.data, []);
  assert.equal(visits.pagination.totalItems, 0);
});

await step('tags list and stats', async () => {
  const tags = await client.listTags();
  assert.deepEqual(tags.data, ['edited', 'sdk']);
  const stats = await client.tagsStats();
  const sdk = stats.data.find((t) => t.tag === 'sdk');
  assert.equal(sdk.shortUrlsCount, 4);
  assert.deepEqual(sdk.visitsSummary, { total: 3, nonBots: 2, bots: 1 });
});

await step('tags renamed and deleted', async () => {
  await client.editTag({ oldName: 'sdk', newName: 'kit' });
  assert.deepEqual((await client.listTags()).data, ['edited', 'kit']);
  assert.deepEqual((await client.getShortUrl({ shortCode: 'sdk-one' })).tags, ['edited', 'kit']);
  await assert.rejects(
    client.editTag({ oldName: 'kit', newName: 'edited' }),
    (error) => error.type === 'https://shlink.io/api/error/tag-conflict' && error.status === 409,
  );
  await assert.rejects(
    client.editTag({ oldName: 'sdk', newName: 'other' }),
    (error) => error.type === 'https://shlink.io/api/error/tag-not-found' && error.status === 404,
  );
  await client.deleteTags(['edited', 'never-used']);
  assert.deepEqual((await client.listTags()).data, ['kit']);
  assert.deepEqual((await client.getShortUrl({ shortCode: 'sdk-one' })).tags, ['kit']);
});

await step('domains list and redirects', async () => {
  const redirects = await client.editDomainRedirects({
    domain, baseUrlRedirect: 'https://example.com/home', invalidShortUrlRedirect: 'https://example.com/expired',
  });
  assert.equal(redirects.baseUrlRedirect, 'https://example.com/home');
  assert.equal(redirects.regular404Redirect, null);
  const domains = await client.listDomains();
  assert.equal(domains.data[0].isDefault, true);
  const branded = domains.data.find((d) => d.domain === domain);
  assert.deepEqual(branded.redirects, redirects);
});

await step('redirect rules set and read back', async () => {
  const set = await client.setShortUrlRedirectRules({ shortCode: 'sdk-one' }, {
    redirectRules: [
      { longUrl: 'https://example.com/sdk/ios', conditions: [{ type: 'device', matchKey: null, matchValue: 'ios' }] },
      {
        longUrl: 'https://example.com/sdk/fr',
        conditions: [
          { type: 'language', matchKey: null, matchValue: 'fr' },
          { type: 'query-param', matchKey: 'ref', matchValue: 'mail' },
        ],
      },
    ],
  });
  const read = await client.getShortUrlRedirectRules({ shortCode: 'sdk-one' });
  assert.deepEqual(read, set);
  assert.equal(read.defaultLongUrl, 'https://example.com/sdk/edited');
  assert.deepEqual(read.redirectRules.map((r) => [r.priority, r.longUrl]), [
    [1, 'https://example.com/sdk/ios'], [2, 'https://example.com/sdk/fr'],
  ]);
  assert.deepEqual(read.redirectRules[1].conditions[1], { type: 'query-param', matchKey: 'ref', matchValue: 'mail' });
  assert.equal((await client.getShortUrl({ shortCode: 'sdk-one' })).hasRedirectRules, true);
});

await step('delete', async () => {
  await client.deleteShortUrl({ shortCode: 'sdk-one' });
  await assert.rejects(
    client.getShortUrl({ shortCode: 'sdk-one' }),
    (error) => error.type === 'https://shlink.io/api/error/short-url-not-found' && error.status === 404,
  );
});

console.log('all steps passed');
