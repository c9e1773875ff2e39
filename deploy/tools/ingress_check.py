"""Checks of the Ingresses in front of the shortener that the Kubernetes schemas cannot make, used
by drift_check.py (which also checks their backends and the closed /api and /console prefixes):

  * an Ingress with `tls` gives every host of its rules a certificate (a host without one is
    answered with the controller's default certificate, which no browser accepts);
  * an Ingress whose certificates cert-manager issues (`cert-manager.io/cluster-issuer` or
    `cert-manager.io/issuer`) has one host per `tls` entry and a Secret of its own per entry: a
    host whose DNS does not point at the ingress yet then fails its own challenge only, and
    never holds up another host's certificate or its renewal (components/branded-domains);
  * no Ingress rewrites the Host header on its way to the pods: the node picks a branded
    domain by the request's Host (docs/operations.md, "Branded domains").
"""

from __future__ import annotations

import re

ISSUER_ANNOTATIONS = ("cert-manager.io/cluster-issuer", "cert-manager.io/issuer")
# ingress-nginx annotations that change the Host the pods see: a fixed upstream host, or a
# snippet setting the header itself.
UPSTREAM_VHOST = "nginx.ingress.kubernetes.io/upstream-vhost"
SNIPPETS = ("nginx.ingress.kubernetes.io/configuration-snippet",
            "nginx.ingress.kubernetes.io/server-snippet")
SETS_HOST = re.compile(r"proxy_set_header\s+host\s", re.IGNORECASE)


def annotations(ing: dict) -> dict:
    return ing["metadata"].get("annotations") or {}


def issued_by_cert_manager(ing: dict) -> bool:
    return any(a in annotations(ing) for a in ISSUER_ANNOTATIONS)


def covers(tls_host: str, host: str) -> bool:
    """Whether a certificate for `tls_host` (a name, or `*.` and a name) is valid for `host`."""
    if tls_host.startswith("*."):
        # A wildcard stands for exactly one label.
        return host.partition(".")[2] == tls_host[2:]
    return tls_host == host


def problems(ing: dict) -> list[str]:
    """What is wrong with the Ingress `ing`, one sentence each."""
    return [*tls_problems(ing), *host_problems(ing)]


def tls_problems(ing: dict) -> list[str]:
    tls = ing["spec"].get("tls") or []
    found = []
    if tls:
        names = [h for entry in tls for h in entry.get("hosts") or []]
        for rule in ing["spec"].get("rules", []):
            host = rule.get("host")
            if host and not any(covers(name, host) for name in names):
                found.append(f"host {host} has no tls entry: the controller would answer it "
                             "with its default certificate")
    if not issued_by_cert_manager(ing):
        return found
    secrets: dict[str, list] = {}
    for entry in tls:
        hosts = entry.get("hosts") or []
        secret = entry.get("secretName")
        if len(hosts) != 1:
            found.append(f"tls entry {hosts} has {len(hosts)} hosts: with cert-manager, one host "
                         "per entry, so that one host's failed challenge holds up no other's "
                         "certificate")
        if not secret:
            found.append(f"tls entry {hosts} has no secretName for cert-manager to fill")
        elif secret in secrets:
            found.append(f"tls Secret {secret} is shared by {secrets[secret]} and {hosts}: a "
                         "Secret (a certificate) per host")
        else:
            secrets[secret] = hosts
    return found


def host_problems(ing: dict) -> list[str]:
    notes = annotations(ing)
    found = []
    if UPSTREAM_VHOST in notes:
        found.append(f"{UPSTREAM_VHOST} rewrites the Host the node picks a branded domain by")
    for key in SNIPPETS:
        if SETS_HOST.search(notes.get(key, "")):
            found.append(f"{key} sets the Host the node picks a branded domain by")
    return found


# --------------------------------------------------------------------------------------------
# Self-test: breaks drift_check.py must catch in an overlay that renders an Ingress whose
# certificates cert-manager issues per host (the prod+branded-domains variant).


def renders_certificates_per_host(docs: list[dict]) -> bool:
    return any(d["kind"] == "Ingress" and issued_by_cert_manager(d)
               and len(d["spec"].get("tls") or []) >= 2 for d in docs)


def mutations():
    def branded(docs):
        return next(d for d in docs if d["kind"] == "Ingress" and issued_by_cert_manager(d))

    def host_without_certificate(docs):
        branded(docs)["spec"]["tls"].pop(0)

    def hosts_in_one_certificate(docs):
        tls = branded(docs)["spec"]["tls"]
        tls[0]["hosts"] += tls.pop(1)["hosts"]

    def certificate_secret_shared(docs):
        tls = branded(docs)["spec"]["tls"]
        tls[1]["secretName"] = tls[0]["secretName"]

    def branded_api_open(docs):
        for path in branded(docs)["spec"]["rules"][-1]["http"]["paths"]:
            if path["path"] == "/api":
                path["backend"]["service"]["name"] = "shortener-public"

    def host_rewritten(docs):
        branded(docs)["metadata"].setdefault("annotations", {})[UPSTREAM_VHOST] = \
            "shortener-public.idalloc.svc.cluster.local"

    def host_set_by_snippet(docs):
        branded(docs)["metadata"].setdefault("annotations", {})[SNIPPETS[0]] = \
            "proxy_set_header Host $proxy_host;\n"

    return [host_without_certificate, hosts_in_one_certificate, certificate_secret_shared,
            branded_api_open, host_rewritten, host_set_by_snippet]
