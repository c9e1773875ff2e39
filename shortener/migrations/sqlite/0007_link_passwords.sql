-- Protected links: the Argon2id hash (a PHC string) of the password visitors must give.
ALTER TABLE links ADD COLUMN password_hash TEXT NULL;
