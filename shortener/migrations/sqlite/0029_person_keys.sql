-- A key a signed-in person makes carries at most what that person holds (see the PostgreSQL
-- migration of the same name): the person's subject and the claims of their latest sign-in.
ALTER TABLE api_keys ADD COLUMN person TEXT NULL;
ALTER TABLE api_keys ADD COLUMN person_claims TEXT NULL;
CREATE INDEX api_keys_person ON api_keys (person) WHERE person IS NOT NULL AND revoked_at IS NULL;
CREATE INDEX console_sessions_subject ON console_sessions (subject, created_at);
