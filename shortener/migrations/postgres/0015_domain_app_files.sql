-- The app-link files a branded domain serves under /.well-known/ (apple-app-site-association
-- and assetlinks.json): the tenant's JSON as compact text, checked (shape and size) before it is
-- written; NULL when unset (those paths answer 404).
ALTER TABLE domains
    ADD COLUMN apple_app_site_association text,
    ADD COLUMN assetlinks text;
