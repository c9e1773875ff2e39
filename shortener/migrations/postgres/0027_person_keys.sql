-- A key a signed-in person makes carries at most what that person holds: the person's subject
-- at the issuer and the claims of their latest sign-in are kept with it, and every node works
-- out the key's scopes in force from those claims and the roles file at each reload (the key's
-- own scopes capped by the person's role in its tenant; no role, not in force). A sign-in
-- refreshes the claims of the person's live keys. Keys made by an API key have neither.
ALTER TABLE api_keys ADD COLUMN person text NULL;
ALTER TABLE api_keys ADD COLUMN person_claims text NULL;
CREATE INDEX api_keys_person ON api_keys (person) WHERE person IS NOT NULL AND revoked_at IS NULL;
