"""Checks of the CloudNativePG wiring (overlays/prod-cnpg) that the Kubernetes schemas cannot make,
used by drift_check.py. An overlay that renders no CloudNativePG `Cluster` is left alone.

The operator creates Secrets the manifests only name: `<cluster>-app` (the owner's credentials)
and `<cluster>-ca` (the CA that signs the server certificates). `generated_secrets` stands them
in, so references to them resolve like any other Secret's.

For each container of the two services whose connection strings name a cluster's Services
(`<cluster>-rw`, `-ro`, `-r`, or a `Pooler` of it):

  * a cluster has three instances or more and synchronous replication (`synchronous.number` 1
    or more); the id-service's writes a cluster with `dataDurability: required` (a lease lost in
    a failover could be granted again; docs/operations.md, "Measured failovers under Patroni");
  * a serving container (not an init container) writes through a `Pooler` of its cluster, so
    every pod's pool shares the pooler's server connections rather than holding its own;
  * a connection string through a `Pooler` in transaction mode comes with the service's
    `*_DATABASE_POOL_MODE=transaction` and a `*_DATABASE_DIRECT_URL` at the same cluster's `-rw`
    Service (migrations, advisory locks and LISTEN cannot go through such a pooler); every
    Pooler the services use is of type `rw` and pools by transaction;
  * `SHORTENER_DATABASE_READ_URL` is the `-ro` Service of the cluster the node writes to;
  * migrations (the init containers) reach the `-rw` Service, never a pooler;
  * every such connection string says `sslmode=require`, with the service's `*_DATABASE_CA_FILE`
    set (the operator's certificates chain to its own CA, which no system store holds).
"""

from __future__ import annotations

import re

API = "postgresql.cnpg.io/v1"
APP_KEYS = ("username", "password", "dbname", "host", "port", "uri", "jdbc-uri", "pgpass")
CA_KEYS = ("ca.crt", "ca.key")
HOST = re.compile(r"@([A-Za-z0-9.-]+)(?::\d+)?/")


def clusters(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs
            if d.get("apiVersion") == API and d.get("kind") == "Cluster"}


def poolers(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs
            if d.get("apiVersion") == API and d.get("kind") == "Pooler"}


def generated_secrets(docs: list[dict]) -> list[dict]:
    """The Secrets the operator makes for each Cluster, with the keys it puts in them."""
    made = []
    for name in clusters(docs):
        for suffix, keys in (("app", APP_KEYS), ("ca", CA_KEYS)):
            made.append({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": f"{name}-{suffix}"},
                         "data": {k: "" for k in keys}})
    return made


def target(url: str | None, docs: list[dict]) -> tuple[str, str] | None:
    """(cluster, route) for a connection string at a cluster's Service or Pooler: route is
    `rw`, `ro`, `r` or `pooler:<name>`. None for any other host."""
    if not url:
        return None
    m = HOST.search(url)
    if not m:
        return None
    host = m.group(1).split(".")[0]
    pools = poolers(docs)
    if host in pools:
        return pools[host]["spec"]["cluster"]["name"], f"pooler:{host}"
    for name in clusters(docs):
        for route in ("rw", "ro", "r"):
            if host == f"{name}-{route}":
                return name, route
    return None


def problems(docs: list[dict], containers: list[tuple[str, str, bool, dict]]) -> list[str]:
    """`containers`: (where, binary, init, env) of every container running a service binary."""
    found = clusters(docs)
    if not found:
        return []
    out = []
    for name, cluster in found.items():
        spec = cluster.get("spec") or {}
        if (spec.get("instances") or 1) < 3:
            out.append(f"Cluster/{name}: {spec.get('instances')} instances; three or more keep "
                       "a synchronous standby through one failure")
        sync = (spec.get("postgresql") or {}).get("synchronous") or {}
        if (sync.get("number") or 0) < 1:
            out.append(f"Cluster/{name}: no synchronous replication (postgresql.synchronous)")
    pools = poolers(docs)
    for where, binary, init, env in containers:
        prefix = "ID_SERVICE" if binary == "id-service" else "SHORTENER"
        write = target(env.get("DATABASE_URL"), docs)
        direct = target(env.get(f"{prefix}_DATABASE_DIRECT_URL"), docs)
        urls = {k: v for k, v in env.items()
                if k in ("DATABASE_URL", f"{prefix}_DATABASE_DIRECT_URL",
                         "SHORTENER_DATABASE_READ_URL") and target(v, docs)}
        for key, url in urls.items():
            if "sslmode=require" not in url:
                out.append(f"{where}: {key} reaches CloudNativePG without sslmode=require")
            if not env.get(f"{prefix}_DATABASE_CA_FILE"):
                out.append(f"{where}: {key} reaches CloudNativePG, whose certificates chain to its "
                           f"own CA, without {prefix}_DATABASE_CA_FILE")
        if write is None:
            continue
        cluster, route = write
        if init and route != "rw":
            out.append(f"{where}: migrations reach {cluster} by {route}, not its -rw Service")
        if not init and not route.startswith("pooler:"):
            out.append(f"{where}: DATABASE_URL reaches {cluster} by {route}, not through a Pooler "
                       "of it")
        if binary == "id-service" and not init:
            durability = ((found[cluster].get("spec") or {}).get("postgresql") or {}) \
                .get("synchronous", {}).get("dataDurability")
            if durability != "required":
                out.append(f"{where}: the ID ledger's cluster {cluster} has dataDurability "
                           f"{durability!r}, not 'required'")
        if route.startswith("pooler:"):
            pooler = pools[route.partition(":")[2]]
            bouncer = (pooler.get("spec") or {}).get("pgbouncer") or {}
            if pooler["spec"].get("type") != "rw":
                out.append(f"{where}: DATABASE_URL writes through Pooler/{pooler['metadata']['name']}"
                           f" of type {pooler['spec'].get('type')!r}, not 'rw'")
            mode = bouncer.get("poolMode", "session")
            if env.get(f"{prefix}_DATABASE_POOL_MODE", "session") != mode:
                out.append(f"{where}: Pooler/{pooler['metadata']['name']} pools by {mode} but "
                           f"{prefix}_DATABASE_POOL_MODE is "
                           f"{env.get(f'{prefix}_DATABASE_POOL_MODE', 'session (default)')}")
            if mode == "transaction" and direct != (cluster, "rw"):
                out.append(f"{where}: through a transaction pooler, {prefix}_DATABASE_DIRECT_URL "
                           f"must reach {cluster}-rw (it reaches {direct})")
        read = target(env.get("SHORTENER_DATABASE_READ_URL"), docs)
        if binary == "shortener" and read is not None and read != (cluster, "ro"):
            out.append(f"{where}: SHORTENER_DATABASE_READ_URL reaches {read}, not {cluster}-ro")
    return out


def renders_clusters(docs: list[dict]) -> bool:
    return bool(clusters(docs))


def mutations():
    def cluster(docs, name):
        return clusters(docs)[name]["spec"]

    def container_env(docs, deployment, init=False):
        d = next(d for d in docs if d["kind"] == "Deployment"
                 and d["metadata"]["name"] == deployment)
        key = "initContainers" if init else "containers"
        return d["spec"]["template"]["spec"][key][0].setdefault("env", [])

    def set_env(env, name, value):
        for e in env:
            if e["name"] == name:
                e.pop("valueFrom", None)
                e["value"] = value
                return
        env.append({"name": name, "value": value})

    def ledger_durability_preferred(docs):
        cluster(docs, "ids-pg")["postgresql"]["synchronous"]["dataDurability"] = "preferred"

    def two_instances(docs):
        cluster(docs, "links-pg")["instances"] = 2

    def pooler_in_session_mode(docs):
        poolers(docs)["ids-pg-pooler-rw"]["spec"]["pgbouncer"]["poolMode"] = "session"

    def direct_url_through_pooler(docs):
        env = container_env(docs, "id-service")
        url = next(e["value"] for e in env if e["name"] == "DATABASE_URL")
        set_env(env, "ID_SERVICE_DATABASE_DIRECT_URL", url)

    def node_through_another_clusters_pooler(docs):
        # Its direct URL (links-pg-rw) no longer reaches the cluster it writes to.
        env = container_env(docs, "shortener")
        url = next(e["value"] for e in env if e["name"] == "DATABASE_URL")
        set_env(env, "DATABASE_URL", url.replace("links-pg-pooler-rw", "ids-pg-pooler-rw"))

    def node_told_session_mode(docs):
        set_env(container_env(docs, "shortener"), "SHORTENER_DATABASE_POOL_MODE", "session")

    def node_without_direct_url(docs):
        env = container_env(docs, "shortener")
        env[:] = [e for e in env if e["name"] != "SHORTENER_DATABASE_DIRECT_URL"]

    def node_listening_through_pooler(docs):
        env = container_env(docs, "shortener")
        url = next(e["value"] for e in env if e["name"] == "DATABASE_URL")
        set_env(env, "SHORTENER_DATABASE_DIRECT_URL", url)

    def node_around_the_pooler(docs):
        env = container_env(docs, "shortener")
        url = next(e["value"] for e in env if e["name"] == "DATABASE_URL")
        set_env(env, "DATABASE_URL", url.replace("links-pg-pooler-rw", "links-pg-rw"))

    def read_url_at_primary(docs):
        env = container_env(docs, "shortener")
        url = next(e["value"] for e in env if e["name"] == "SHORTENER_DATABASE_READ_URL")
        set_env(env, "SHORTENER_DATABASE_READ_URL", url.replace("links-pg-ro", "links-pg-rw"))

    def migrations_through_pooler(docs):
        env = container_env(docs, "id-service", init=True)
        url = next(e["value"] for e in env if e["name"] == "DATABASE_URL")
        set_env(env, "DATABASE_URL", url.replace("ids-pg-rw", "ids-pg-pooler-rw"))

    def no_tls(docs):
        env = container_env(docs, "id-service")
        url = next(e["value"] for e in env if e["name"] == "DATABASE_URL")
        set_env(env, "DATABASE_URL", url.replace("sslmode=require", "sslmode=prefer"))

    def missing_app_secret_key(docs):
        env = container_env(docs, "shortener")
        next(e for e in env if e["name"] == "DB_USER")["valueFrom"]["secretKeyRef"]["key"] = "user"

    return [ledger_durability_preferred, two_instances, pooler_in_session_mode,
            direct_url_through_pooler, node_through_another_clusters_pooler,
            node_told_session_mode, node_without_direct_url, node_listening_through_pooler,
            node_around_the_pooler, read_url_at_primary, migrations_through_pooler, no_tls,
            missing_app_secret_key]
