# Sourced by the postgres image's entrypoint on the first start (empty data directory):
# one database and one owner role per service, passwords from the postgres-secrets Secret.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v idservice_password="$ID_SERVICE_DB_PASSWORD" \
  -v shortener_password="$SHORTENER_DB_PASSWORD" <<'SQL'
CREATE ROLE idservice LOGIN PASSWORD :'idservice_password';
CREATE DATABASE idservice OWNER idservice;
CREATE ROLE shortener LOGIN PASSWORD :'shortener_password';
CREATE DATABASE shortener OWNER shortener;
SQL
