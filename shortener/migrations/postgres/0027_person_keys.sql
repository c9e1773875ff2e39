-- A key a signed-in person makes (or a key of theirs makes) carries at most what that person
-- holds: the person's subject at the issuer and the claims of their latest sign-in are kept
-- with it, and every node works out the key's scopes in force from those claims and the roles
-- file at each reload (the key's own scopes capped by the person's role in its tenant; no role,
-- not in force). A sign-in gives the person's live keys and open sessions its claims; a new
-- key takes those of the person's latest session. Keys made by other keys have neither.
ALTER TABLE api_keys ADD COLUMN person text NULL;
ALTER TABLE api_keys ADD COLUMN person_claims text NULL;
CREATE INDEX api_keys_person ON api_keys (person) WHERE person IS NOT NULL AND revoked_at IS NULL;
-- A person's sessions, newest last: the latest sign-in's claims, and the open ones a sign-in
-- updates.
CREATE INDEX console_sessions_subject ON console_sessions (subject, created_at);
