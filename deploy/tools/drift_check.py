#!/usr/bin/env python3
"""Checks rendered Kubernetes manifests against what the two binaries actually accept.

The truth comes from the binaries themselves: clap prints every option's environment variable as
`[env: NAME=...]` and its default as `[default: ...]` in `--help`. For each container running
`id-service` or `shortener` (recognised by the image name) this checks that

  * its subcommand (`args[0]`: `serve`, `migrate`, or none) is one the binary lists;
  * every environment variable it gets (env, envFrom ConfigMaps and Secrets) is one that
    subcommand accepts (plus RUST_LOG and the standard OTEL_* variables, read by the log filter
    and the trace pipeline rather than clap);
  * the named container ports `http`, `grpc`, `admin` match the `*_HTTP_ADDR`, `*_GRPC_ADDR`,
    `*_ADMIN_ADDR` listen addresses (the manifest's value, else the binary's default);
  * liveness probes GET /healthz and readiness probes GET /readyz on the admin port, gRPC probes
    hit the gRPC port, and nothing probes with exec (the images have no shell);
  * terminationGracePeriodSeconds exceeds the preStop pause plus the drain timeout;
  * an id-service server authenticates its callers with ID_SERVICE_TOKENS_FILE or says
    --insecure-no-auth (never both, never neither: the binary refuses to serve), and the overlay
    named prod never says --insecure-no-auth;
  * the security context and resources are set.

It also cross-checks the rendered objects against each other (Service target ports, Ingress
backends, NetworkPolicy ports, ServiceMonitor ports, HPA and PDB targets), the Ingresses'
certificates and Host handling (ingress_check.py), the CloudNativePG clusters and poolers and the
connection strings that reach them (cnpg_check.py), and the monitoring
against the metric families the binaries export, learnt by running them (exported_metrics.py):

  * every service metric an alert rule or a dashboard query names is a series of an exported
    family (`x_total` of a counter, `x_bucket`/`x_sum`/`x_count` of a histogram);
  * every exported family is charted by a dashboard panel, or listed in NOT_CHARTED with why.

    drift_check.py [--bin-dir DIR | --contract] [--metrics-cache FILE] [--repo DIR] NAME=RENDERED.yaml ...
    drift_check.py --self-test [--bin-dir DIR | --contract] [--metrics-cache FILE] NAME=RENDERED.yaml ...

Without --bin-dir the help texts come from `cargo run -q -p PACKAGE -- ... --help` in the
repository, and the binaries run for their metrics are built with `cargo build`. --contract uses
the written contract below instead of the binaries, and the metric tables of docs/shortener.md and
docs/id-service.md instead of running them; it exists only for the time before the binaries
implement their command lines, and says so loudly.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import cnpg_check
import exported_metrics
import ingress_check
from exported_metrics import Family

BINARIES = ("id-service", "shortener")
# What each binary runs with no subcommand (`shortener` serves by default; `id-service` has no
# serve subcommand: it serves at the top level).
DEFAULT_SUBCOMMAND = {"id-service": None, "shortener": "serve"}
# Read by tracing's EnvFilter (RUST_LOG) and by the trace pipeline (the standard OpenTelemetry
# variables the `otel` crate reads; docs/operations.md, "Tracing"), not by clap, so --help does
# not list them.
ALWAYS_ACCEPTED = {
    "RUST_LOG",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_EXPORT_TIMEOUT",
}
# The drain bound the contract promises when --help names none.
CONTRACT_DRAIN_SECONDS = 20

# Exported metric families deliberately not charted by the dashboard, each with the reason. The
# check fails for an exported family that no dashboard uses and that is not listed here, and for
# an entry here that the binaries no longer export.
NOT_CHARTED: dict[str, str] = {
    # (none at present: every family has a panel. Add `"family": "why"` for e.g. build info.)
}

# The written contract (and the options the sources declared when this was written), in clap's
# help format, for --contract only.
CONTRACT_HELP = {
    ("id-service",): """Usage: id-service [OPTIONS] [COMMAND]

Commands:
  migrate  Apply migrations and exit
  help     Print this message or the help of the given subcommand(s)

Options:
      --grpc-addr <GRPC_ADDR>    [env: ID_SERVICE_GRPC_ADDR=] [default: 0.0.0.0:50051]
      --admin-addr <ADMIN_ADDR>  [env: ID_SERVICE_ADMIN_ADDR=] [default: 0.0.0.0:9091]
      --database-url <URL>       [env: DATABASE_URL]
      --min-block <N>            [env: ID_SERVICE_MIN_BLOCK=]
      --max-block <N>            [env: ID_SERVICE_MAX_BLOCK=]
      --tokens-file <FILE>       [env: ID_SERVICE_TOKENS_FILE=]
      --namespaces <LIST>        [env: ID_SERVICE_NAMESPACES=]
      --drain-timeout <D>        [env: ID_SERVICE_DRAIN_TIMEOUT=] [default: 10s]
      --log-format <FORMAT>      [env: ID_SERVICE_LOG_FORMAT=] [default: text]
  -h, --help                     Print help
""",
    ("id-service", "migrate"): """Usage: id-service migrate

Options:
  -h, --help                Print help
""",
    ("shortener",): """Usage: shortener [COMMAND]

Commands:
  serve    Serve (the default)
  migrate  Apply the links schema and exit
  keygen   Write a fresh code-space key
  codes    Map IDs to codes and back
  help     Print this message or the help of the given subcommand(s)

Options:
  -h, --help     Print help
""",
    ("shortener", "serve"): """Usage: shortener serve [OPTIONS]

Options:
      --http-addr <ADDR>         [env: SHORTENER_HTTP_ADDR=] [default: 0.0.0.0:8080]
      --grpc-addr <ADDR>         [env: SHORTENER_GRPC_ADDR=] [default: 0.0.0.0:50052]
      --admin-addr <ADDR>        [env: SHORTENER_ADMIN_ADDR=] [default: 0.0.0.0:9090]
      --database-url <URL>       [env: DATABASE_URL]
      --data-dir <DIR>           [env: SHORTENER_DATA_DIR=]
      --id-service <URLS>        [env: SHORTENER_ID_SERVICE=]
      --id-service-token <T>     [env: SHORTENER_ID_SERVICE_TOKEN]
      --id-namespace <NS>        [env: SHORTENER_ID_NAMESPACE=] [default: links]
      --holder <NAME>            [env: SHORTENER_HOLDER=]
      --key-file <FILE>          [env: SHORTENER_KEY_FILE=]
      --api-keys-file <FILE>     [env: SHORTENER_API_KEYS_FILE=]
      --public-url <URL>         [env: SHORTENER_PUBLIC_URL=]
      --code-length <L>          [env: SHORTENER_CODE_LENGTH=] [default: 7]
      --redirect-status <S>      [env: SHORTENER_REDIRECT_STATUS=] [default: 302]
      --drain-timeout <SECS>     [env: SHORTENER_DRAIN_TIMEOUT=] [default: 20]
      --log-format <FORMAT>      [env: SHORTENER_LOG_FORMAT=] [default: text]
  -h, --help                     Print help
""",
}


# `shortener migrate` takes the serve configuration.
CONTRACT_HELP[("shortener", "migrate")] = CONTRACT_HELP[("shortener", "serve")].replace(
    "shortener serve", "shortener migrate")


# --------------------------------------------------------------------------------------------
# Reading clap's help.


@dataclass
class Help:
    """What one (sub)command's --help says."""

    envs: dict[str, str | None] = field(default_factory=dict)  # name -> default
    subcommands: set[str] = field(default_factory=set)


ENV_RE = re.compile(r"\[env:\s*([A-Za-z_][A-Za-z0-9_]*)(?:=[^\]]*)?\]")
DEFAULT_RE = re.compile(r"\[default:\s*([^\]]*)\]")


def parse_help(text: str) -> Help:
    """Splits clap help into sections and option entries; collects env names and defaults."""
    help_ = Help()
    section = None
    entries: list[list[str]] = []
    for line in text.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            section = line.strip().rstrip(":").lower()
            continue
        if not line.strip():
            if entries and section != "commands":
                entries[-1].append("")
            continue
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if section == "commands":
            if indent <= 4:
                help_.subcommands.add(stripped.split()[0])
            continue
        # A new option entry starts with `-x`, `--long` or a positional `<NAME>`/`[NAME]`,
        # indented by at most 6 spaces; anything else continues the previous entry.
        if indent <= 6 and re.match(r"(-\w|--\w|<|\[[A-Z])", stripped):
            entries.append([stripped])
        elif entries:
            entries[-1].append(stripped)
    for entry in entries:
        joined = " ".join(entry)
        env = ENV_RE.search(joined)
        if not env:
            continue
        default = DEFAULT_RE.search(joined)
        help_.envs[env.group(1)] = default.group(1).strip().strip('"') if default else None
    help_.subcommands.discard("help")
    return help_


class HelpSource:
    """Gets --help text from built binaries, `cargo run`, or the written contract."""

    def __init__(self, repo: Path, bin_dir: Path | None, contract: bool):
        self.repo, self.bin_dir, self.contract = repo, bin_dir, contract
        self.cache: dict[tuple[str, ...], Help] = {}

    def get(self, binary: str, subcommand: str | None) -> Help:
        key = (binary,) if subcommand is None else (binary, subcommand)
        if key not in self.cache:
            self.cache[key] = parse_help(self._text(key))
        return self.cache[key]

    def accepted(self, binary: str, subcommand: str | None) -> Help:
        """What a run of `binary [subcommand]` reads: the subcommand's own options and the
        top-level ones (clap reads a parent's env variables whatever the subcommand)."""
        top = self.get(binary, None)
        if subcommand is None:
            return top
        sub = self.get(binary, subcommand)
        return Help(envs={**top.envs, **sub.envs}, subcommands=sub.subcommands)

    def _text(self, key: tuple[str, ...]) -> str:
        if self.contract:
            if key not in CONTRACT_HELP:
                raise SystemExit(f"the written contract has no `{' '.join(key)}`")
            return CONTRACT_HELP[key]
        binary, args = key[0], [*key[1:], "--help"]
        if self.bin_dir:
            cmd = [str(self.bin_dir / binary), *args]
        else:
            cmd = ["cargo", "run", "-q", "-p", binary, "--bin", binary, "--", *args]
        # Without the variables the help describes, so `[env: X=value]` shows no local values.
        env = {
            k: v
            for k, v in os.environ.items()
            if not (k.startswith(("SHORTENER_", "ID_SERVICE_")) or k in ("DATABASE_URL", "RUST_LOG"))
        }
        env["NO_COLOR"] = "1"
        proc = subprocess.run(cmd, cwd=self.repo, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(
                f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{proc.stderr.strip()[-2000:]}"
            )
        return proc.stdout


# --------------------------------------------------------------------------------------------
# The rendered manifests.


def image_binary(image: str) -> str | None:
    """`registry/x/shortener:1.2@sha256:...` -> `shortener` when it is one of ours."""
    name = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return name if name in BINARIES else None


def pod_spec(doc: dict) -> dict | None:
    kind = doc.get("kind")
    spec = doc.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        return spec.get("template", {}).get("spec")
    if kind == "CronJob":
        return spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
    return None


def pod_labels(doc: dict) -> dict:
    if doc.get("kind") == "Pod":
        return doc.get("metadata", {}).get("labels") or {}
    if doc.get("kind") == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"].get("metadata", {}).get("labels") or {}
    return doc.get("spec", {}).get("template", {}).get("metadata", {}).get("labels") or {}


def selects(selector: dict | None, labels: dict, plain: bool = False) -> bool:
    """Whether a LabelSelector (or, with plain, a Service's key/value selector) matches labels."""
    if selector is None:
        return False
    match = selector if plain else selector.get("matchLabels") or {}
    if not all(labels.get(k) == v for k, v in match.items()):
        return False
    for expr in [] if plain else selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if (op == "In" and labels.get(key) not in values) \
                or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) \
                or (op == "DoesNotExist" and key in labels):
            return False
    return True


def port_of(addr: str) -> int | None:
    m = re.search(r":(\d+)$", addr.strip())
    return int(m.group(1)) if m else None


def seconds(value: str | None) -> float | None:
    """`20`, `20s`, `500ms`, `2m`, `1h`, `1d` (either case) -> seconds; None for anything else."""
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*", value, re.IGNORECASE)
    if not m:
        return None
    unit = (m.group(2) or "s").lower()
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]


class Checker:
    def __init__(self, helps: HelpSource, families: dict[str, Family]):
        self.helps = helps
        self.families = families
        # Series name -> family, for the names PromQL expressions use.
        self.series = {series: f for f in families.values() for series in f.series()}
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.checked_containers = 0

    def error(self, where: str, msg: str) -> None:
        self.errors.append(f"{where}: {msg}")

    # ---------------------------------------------------------------- per container

    def check_overlay(self, name: str, docs: list[dict]) -> None:
        self.docs = docs
        self.overlay = name
        by_kind: dict[str, list[dict]] = {}
        for d in docs:
            by_kind.setdefault(d["kind"], []).append(d)
        # Secrets the CloudNativePG operator makes for the Clusters rendered here.
        by_kind.setdefault("Secret", []).extend(cnpg_check.generated_secrets(docs))
        self.by_kind = by_kind
        self.service_containers: list[tuple[str, str, bool, dict]] = []
        for doc in docs:
            spec = pod_spec(doc)
            if spec is None:
                continue
            where = f"[{name}] {doc['kind']}/{doc['metadata']['name']}"
            self.check_pod_security(where, spec)
            for init in (True, False):
                key = "initContainers" if init else "containers"
                for c in spec.get(key) or []:
                    self.check_container(f"{where} container {c['name']}", doc, spec, c, init)
        self.check_services()
        self.check_ingresses()
        self.check_network_policies()
        self.check_scaling()
        self.check_monitoring()
        for problem in cnpg_check.problems(docs, self.service_containers):
            # Container problems start with their container's place; the others name an object.
            self.errors.append(problem if problem.startswith("[") else f"[{name}] {problem}")

    def find(self, kind: str, name: str) -> dict | None:
        for d in self.by_kind.get(kind, []):
            if d["metadata"]["name"] == name:
                return d
        return None

    def container_env(self, where: str, c: dict) -> dict[str, str | None]:
        """Every variable the container gets, with its value where the manifest shows it."""
        values: dict[str, str | None] = {}
        for src in c.get("envFrom") or []:
            prefix = src.get("prefix", "")
            if "configMapRef" in src:
                ref, kind = src["configMapRef"], "ConfigMap"
            else:
                ref, kind = src["secretRef"], "Secret"
            obj = self.find(kind, ref["name"])
            if obj is None:
                if not ref.get("optional"):
                    self.error(where, f"envFrom {kind} {ref['name']} is not in the manifests")
                continue
            keys = dict(obj.get("data") or {})
            keys.update(obj.get("stringData") or {})
            for k, v in keys.items():
                values[prefix + k] = v if kind == "ConfigMap" else None
        for e in c.get("env") or []:
            values[e["name"]] = e.get("value")
            ref = (e.get("valueFrom") or {})
            for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                if key in ref:
                    obj = self.find(kind, ref[key]["name"])
                    data = {**((obj or {}).get("data") or {}), **((obj or {}).get("stringData") or {})}
                    if obj is None or ref[key]["key"] not in data:
                        if not ref[key].get("optional"):
                            self.error(where, f"env {e['name']} refers to missing {kind} key "
                                              f"{ref[key]['name']}/{ref[key]['key']}")
                    elif kind == "ConfigMap":
                        values[e["name"]] = data[ref[key]["key"]]
        return values

    def check_container(self, where: str, doc: dict, spec: dict, c: dict, init: bool) -> None:
        self.check_container_security(where, spec, c)
        binary = image_binary(c.get("image", ""))
        if binary is None:
            return
        self.checked_containers += 1
        if c.get("command"):
            if Path(c["command"][0]).name != binary:
                self.error(where, f"command {c['command']} does not run {binary}")
            args = [*c["command"][1:], *(c.get("args") or [])]
        else:
            args = list(c.get("args") or [])
        sub = args[0] if args and not args[0].startswith("-") else DEFAULT_SUBCOMMAND[binary]
        top = self.helps.get(binary, None)
        if sub is not None and sub not in top.subcommands:
            self.error(where, f"`{binary} {sub}`: {binary} has no subcommand {sub!r} "
                              f"(it lists {sorted(top.subcommands)})")
            return
        if init and sub != "migrate":
            self.error(where, f"init container runs `{' '.join([binary, *([sub] if sub else [])])}`"
                              ", expected migrate")
        if not init and sub == "migrate":
            self.error(where, "a long-running container runs migrate (it exits)")
        accepted = self.helps.accepted(binary, sub)
        env = self.container_env(where, c)
        self.service_containers.append((where, binary, init, env))
        # Variables that only feed another's value through Kubernetes' $(NAME) expansion (a
        # password from an operator's Secret put into a connection string) reach no option.
        expanded = {n for v in env.values() if v for n in re.findall(r"\$\((\w+)\)", v)}
        for name in sorted(env):
            if name not in accepted.envs and name not in ALWAYS_ACCEPTED and name not in expanded:
                command = " ".join([binary, *([sub] if sub else [])])
                self.error(where, f"env {name} is not accepted by `{command}`")
        self.check_files(where, spec, c, env)
        if init:
            return
        self.check_ports_and_probes(where, c, accepted, env)
        self.check_grace(where, spec, c, accepted, env)
        if binary == "id-service":
            self.check_id_service_auth(where, args, env)

    def check_id_service_auth(self, where: str, args: list, env: dict) -> None:
        insecure = "--insecure-no-auth" in args
        tokens = "ID_SERVICE_TOKENS_FILE" in env
        if insecure and tokens:
            self.error(where, "both ID_SERVICE_TOKENS_FILE and --insecure-no-auth: the binary "
                              "refuses to start")
        elif not insecure and not tokens:
            self.error(where, "neither ID_SERVICE_TOKENS_FILE nor --insecure-no-auth: the binary "
                              "refuses to serve without authentication")
        # prod, and prod with a component of its (prod+NAME, rendered by deploy/check).
        if insecure and self.overlay.partition("+")[0] == "prod":
            self.error(where, "the prod overlay must authenticate callers (--insecure-no-auth)")

    def check_files(self, where: str, spec: dict, c: dict, env: dict) -> None:
        """Every *_FILE path points into a mount, at a key its Secret or ConfigMap has."""
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for name, value in env.items():
            if not name.endswith("_FILE") or not value:
                continue
            mounts = [m for m in c.get("volumeMounts") or []
                      if value.startswith(m["mountPath"].rstrip("/") + "/")]
            if not mounts:
                self.error(where, f"{name}={value} is not inside any volume mount")
                continue
            mount = max(mounts, key=lambda m: len(m["mountPath"]))
            rel = value[len(mount["mountPath"].rstrip("/")) + 1:]
            volume = volumes.get(mount["name"], {})
            for kind, key, ref in (("Secret", "secret", "secretName"), ("ConfigMap", "configMap", "name")):
                if key not in volume:
                    continue
                if volume[key].get("items"):
                    if rel not in {i["path"] for i in volume[key]["items"]}:
                        self.error(where, f"{name}={value}: the {mount['name']} volume has no item {rel}")
                    continue
                obj = self.find(kind, volume[key][ref])
                if obj is not None and rel not in {**(obj.get("data") or {}), **(obj.get("stringData") or {})}:
                    self.error(where, f"{name}={value}: {kind}/{volume[key][ref]} has no key {rel}")

    def check_ports_and_probes(self, where: str, c: dict, accepted: Help, env: dict) -> None:
        # Listen addresses by role, from the manifest's value or the binary's default.
        addrs: dict[str, int] = {}
        for name, default in accepted.envs.items():
            m = re.match(r".*_([A-Z]+)_ADDR$", name)
            if not m:
                continue
            value = env.get(name) if env.get(name) is not None else default
            if value is None:
                continue
            port = port_of(value)
            if port is None:
                self.error(where, f"{name}={value!r} has no port")
                continue
            addrs[m.group(1).lower()] = port
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports") or []}
        for role, port in addrs.items():
            if role not in ports:
                self.error(where, f"no container port named {role!r} for the {role} listener "
                                  f"(port {port})")
            elif ports[role] != port:
                self.error(where, f"container port {role}={ports[role]} but the {role} listener "
                                  f"is on {port}")
        for name, port in ports.items():
            if name not in addrs:
                self.error(where, f"container port {name}={port} matches no listener "
                                  f"({sorted(addrs)})")

        def resolve(p):
            return ports.get(p) if isinstance(p, str) else p

        wanted = {"livenessProbe": {"/healthz"}, "readinessProbe": {"/readyz"},
                  "startupProbe": {"/healthz", "/readyz"}}
        for probe_kind, paths in wanted.items():
            probe = c.get(probe_kind)
            if probe is None:
                if probe_kind != "startupProbe":
                    self.error(where, f"no {probe_kind}")
                continue
            if "exec" in probe:
                self.error(where, f"{probe_kind} uses exec; the image has no shell or tools")
            if "httpGet" in probe:
                get = probe["httpGet"]
                if get.get("path") not in paths:
                    self.error(where, f"{probe_kind} GETs {get.get('path')!r}, expected "
                                      f"{' or '.join(sorted(paths))}")
                if resolve(get.get("port")) != addrs.get("admin"):
                    self.error(where, f"{probe_kind} port {get.get('port')!r} is not the admin "
                                      f"port {addrs.get('admin')}")
                if get.get("scheme", "HTTP") != "HTTP":
                    self.error(where, f"{probe_kind} uses {get['scheme']}; the admin port is plain HTTP")
            if "grpc" in probe:
                if probe["grpc"].get("port") != addrs.get("grpc"):
                    self.error(where, f"{probe_kind} gRPC port {probe['grpc'].get('port')} is not "
                                      f"the gRPC port {addrs.get('grpc')}")
            if "tcpSocket" in probe:
                if resolve(probe["tcpSocket"].get("port")) not in addrs.values():
                    self.error(where, f"{probe_kind} tcpSocket port is no listener")

    def check_grace(self, where: str, spec: dict, c: dict, accepted: Help, env: dict) -> None:
        drain = None
        for name, default in accepted.envs.items():
            if name.endswith("_DRAIN_TIMEOUT"):
                value = env.get(name) if env.get(name) is not None else default
                drain = seconds(value)
                if drain is None and value is not None:
                    self.error(where, f"{name}={value!r} is not a span of time this check reads")
        if drain is None:
            drain = CONTRACT_DRAIN_SECONDS
        pause = ((c.get("lifecycle") or {}).get("preStop") or {}).get("sleep", {}).get("seconds", 0)
        grace = spec.get("terminationGracePeriodSeconds", 30)
        if grace <= pause + drain:
            self.error(where, f"terminationGracePeriodSeconds {grace} must exceed preStop "
                              f"{pause}s + drain {drain:g}s")

    # ---------------------------------------------------------------- hardening

    def check_pod_security(self, where: str, spec: dict) -> None:
        psc = spec.get("securityContext") or {}
        if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
            if not all((c.get("securityContext") or {}).get("seccompProfile", {}).get("type")
                       == "RuntimeDefault" for c in spec.get("containers", [])):
                self.error(where, "seccompProfile RuntimeDefault is not set")
        if spec.get("automountServiceAccountToken") is not False:
            self.warnings.append(f"{where}: the service account token is mounted")

    def check_container_security(self, where: str, spec: dict, c: dict) -> None:
        psc = spec.get("securityContext") or {}
        sc = c.get("securityContext") or {}
        if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
            self.error(where, "runAsNonRoot is not true")
        if (sc.get("runAsUser", psc.get("runAsUser")) or 0) == 0:
            self.error(where, "runAsUser is not a numeric non-root user")
        if sc.get("readOnlyRootFilesystem") is not True:
            self.error(where, "readOnlyRootFilesystem is not true")
        if sc.get("allowPrivilegeEscalation") is not False:
            self.error(where, "allowPrivilegeEscalation is not false")
        if sc.get("privileged"):
            self.error(where, "privileged")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            self.error(where, "capabilities do not drop ALL")
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if "memory" not in (res.get(part) or {}):
                self.error(where, f"no memory {part}")
        if "cpu" not in (res.get("requests") or {}):
            self.error(where, "no cpu request")

    # ---------------------------------------------------------------- cross references

    def workloads(self):
        for d in self.docs:
            spec = pod_spec(d)
            if spec is not None:
                yield d, spec, pod_labels(d)

    def container_ports(self, spec: dict) -> dict:
        return {p.get("name"): p["containerPort"]
                for c in spec.get("containers", []) for p in c.get("ports") or []}

    def check_services(self) -> None:
        for svc in self.by_kind.get("Service", []):
            where = f"[{self.overlay}] Service/{svc['metadata']['name']}"
            selector = svc["spec"].get("selector")
            if not selector:
                continue
            pods = [(d, s) for d, s, labels in self.workloads()
                    if selects(selector, labels, plain=True)]
            if not pods:
                self.error(where, f"selector {selector} matches no workload")
                continue
            for d, spec in pods:
                ports = self.container_ports(spec)
                for p in svc["spec"].get("ports", []):
                    target = p.get("targetPort", p["port"])
                    ok = target in ports if isinstance(target, str) else target in ports.values()
                    if not ok:
                        self.error(where, f"targetPort {target!r} is not a container port of "
                                          f"{d['kind']}/{d['metadata']['name']}")

    def service_port(self, name: str, port: dict) -> bool:
        svc = self.find("Service", name)
        if svc is None:
            return False
        for p in svc["spec"].get("ports", []):
            if ("name" in port and p.get("name") == port["name"]) or p["port"] == port.get("number"):
                return True
        return False

    def check_ingresses(self) -> None:
        for ing in self.by_kind.get("Ingress", []):
            where = f"[{self.overlay}] Ingress/{ing['metadata']['name']}"
            for rule in ing["spec"].get("rules", []):
                for path in rule.get("http", {}).get("paths", []):
                    svc = path["backend"]["service"]
                    if not self.service_port(svc["name"], svc["port"]):
                        self.error(where, f"backend {svc['name']}:{svc['port']} is not a Service port")
            self.check_closed_prefixes(where, ing)
            for problem in ingress_check.problems(ing):
                self.error(where, problem)

    def check_closed_prefixes(self, where: str, ing: dict) -> None:
        """An Ingress that publishes the redirect edge keeps the JSON API and the console internal:
        their prefixes must lead to a Service without a selector (no endpoints). The console may
        be opened on purpose with the annotation `shortener.console/public: "true"`."""
        annotations = ing["metadata"].get("annotations") or {}
        console_open = annotations.get("shortener.console/public") == "true"
        for rule in ing["spec"].get("rules", []):
            paths = rule.get("http", {}).get("paths", [])
            if not any(p["path"] == "/" for p in paths):
                continue
            backends = {p["path"]: p["backend"]["service"]["name"] for p in paths}
            for prefix in ("/api", "/console"):
                if prefix == "/console" and console_open:
                    continue
                name = backends.get(prefix)
                svc = self.find("Service", name) if name else None
                if svc is None or svc["spec"].get("selector"):
                    self.error(where, f"{prefix} must go to a Service without endpoints on the public host"
                               f" (found {name or 'no path'}; it would reach the pods' {prefix})")

    def check_network_policies(self) -> None:
        for np in self.by_kind.get("NetworkPolicy", []):
            where = f"[{self.overlay}] NetworkPolicy/{np['metadata']['name']}"
            pods = [s for d, s, labels in self.workloads()
                    if selects(np["spec"]["podSelector"], labels)]
            if not pods:
                self.error(where, "podSelector matches no workload")
                continue
            for rule in np["spec"].get("ingress", []):
                for p in rule.get("ports", []):
                    if isinstance(p.get("port"), str) and not all(
                            p["port"] in self.container_ports(s) for s in pods):
                        self.error(where, f"port {p['port']!r} is not a container port of the "
                                          "selected pods")

    def check_scaling(self) -> None:
        for hpa in self.by_kind.get("HorizontalPodAutoscaler", []):
            ref = hpa["spec"]["scaleTargetRef"]
            target = self.find(ref["kind"], ref["name"])
            where = f"[{self.overlay}] HorizontalPodAutoscaler/{hpa['metadata']['name']}"
            if target is None:
                self.error(where, f"scales missing {ref['kind']}/{ref['name']}")
            elif "replicas" in target["spec"]:
                self.error(where, f"{ref['kind']}/{ref['name']} also sets replicas; every apply "
                                  "would reset the autoscaler")
        for pdb in self.by_kind.get("PodDisruptionBudget", []):
            where = f"[{self.overlay}] PodDisruptionBudget/{pdb['metadata']['name']}"
            matched = [d for d, s, labels in self.workloads()
                       if selects(pdb["spec"]["selector"], labels)]
            if not matched:
                self.error(where, "selector matches no workload")
            min_available = pdb["spec"].get("minAvailable")
            for d in matched:
                # A fixed replica count at or below minAvailable blocks every node drain
                # (autoscaled Deployments have no replicas field and are not judged here).
                if isinstance(min_available, int) and "replicas" in d["spec"] \
                        and min_available >= d["spec"]["replicas"]:
                    self.error(where, f"minAvailable {min_available} blocks every drain of "
                                      f"{d['spec']['replicas']} replica(s)")

    def check_monitoring(self) -> None:
        for sm in self.by_kind.get("ServiceMonitor", []):
            where = f"[{self.overlay}] ServiceMonitor/{sm['metadata']['name']}"
            services = [s for s in self.by_kind.get("Service", [])
                        if selects(sm["spec"].get("selector"), s["metadata"].get("labels") or {})]
            if not services:
                self.error(where, "selector matches no Service")
            for ep in sm["spec"].get("endpoints", []):
                if ep.get("path", "/metrics") != "/metrics":
                    self.error(where, f"scrapes {ep.get('path')}, the services serve /metrics")
                for s in services:
                    names = {p.get("name"): p for p in s["spec"].get("ports", [])}
                    if ep.get("port") not in names:
                        self.error(where, f"port {ep.get('port')!r} is not a port of "
                                          f"Service/{s['metadata']['name']}")
                    elif not str(names[ep["port"]].get("targetPort")) == "admin":
                        self.error(where, f"port {ep['port']!r} does not lead to the admin port")
        for rule_doc in self.by_kind.get("PrometheusRule", []):
            where = f"[{self.overlay}] PrometheusRule/{rule_doc['metadata']['name']}"
            for group in rule_doc["spec"].get("groups", []):
                for rule in group.get("rules", []):
                    name = rule.get("alert") or rule.get("record")
                    if not name or "expr" not in rule:
                        self.error(where, f"rule without alert/record name or expr: {rule}")
                        continue
                    if rule.get("alert"):
                        if rule.get("labels", {}).get("severity") not in ("warning", "critical", "info"):
                            self.error(where, f"{name}: severity label missing or unknown")
                        if "summary" not in rule.get("annotations", {}):
                            self.error(where, f"{name}: no summary annotation")
                    self.check_expr(f"{where} {name}", str(rule["expr"]))
        charted: set[str] = set()
        dashboards = 0
        for cm in self.by_kind.get("ConfigMap", []):
            if (cm["metadata"].get("labels") or {}).get("grafana_dashboard") != "1":
                continue
            for key, text in (cm.get("data") or {}).items():
                where = f"[{self.overlay}] ConfigMap/{cm['metadata']['name']} {key}"
                try:
                    dash = json.loads(text)
                except json.JSONDecodeError as e:
                    self.error(where, f"not JSON: {e}")
                    continue
                dashboards += 1
                for expr in self.dashboard_exprs(dash):
                    charted |= self.check_expr(where, expr)
        if dashboards:
            self.check_coverage(charted)

    def check_coverage(self, charted: set[str]) -> None:
        """Every exported family is charted by a dashboard, or listed in NOT_CHARTED with why."""
        where = f"[{self.overlay}] dashboards"
        for name, f in sorted(self.families.items()):
            if name not in charted and name not in NOT_CHARTED:
                self.error(where, f"{f.binary} exports {name} ({f.kind}), which no dashboard panel "
                                  "uses: chart it, or list it in NOT_CHARTED with the reason")
        for name in sorted(NOT_CHARTED):
            if name not in self.families:
                self.error(where, f"NOT_CHARTED lists {name}, which the binaries do not export")
            elif name in charted:
                self.error(where, f"NOT_CHARTED lists {name}, which a dashboard charts after all")

    def dashboard_exprs(self, node, key: str | None = None):
        """Panel target expressions and the templating variables' queries."""
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("expr", "definition") and isinstance(v, str):
                    yield v
                elif k == "query" and isinstance(v, str) and key == "list":
                    yield v
                else:
                    yield from self.dashboard_exprs(v, k if isinstance(v, list) else key)
        elif isinstance(node, list):
            for v in node:
                yield from self.dashboard_exprs(v, key)

    def check_expr(self, where: str, expr: str) -> set[str]:
        """Every service metric the expression names is a series of an exported family; returns
        the families it uses."""
        used = set()
        for name in re.findall(r"\b((?:shortener|idservice)_[a-zA-Z0-9_]+)", expr):
            family = self.series.get(name)
            if family is not None:
                used.add(family.name)
            elif name in self.families:
                f = self.families[name]
                self.error(where, f"uses {name}, the name of a {f.kind} family; its series are "
                                  f"{', '.join(sorted(f.series()))}")
            else:
                self.error(where, f"uses metric {name}, which the services do not export")
        return used


def families_from_docs(repo: Path) -> dict[str, Family]:
    """--contract only: the families named in the metrics tables of docs/shortener.md and
    docs/id-service.md (a written contract, not what the binaries do)."""
    families: dict[str, Family] = {}
    for binary, doc in (("shortener", "docs/shortener.md"), ("id-service", "docs/id-service.md")):
        text = (repo / doc).read_text()
        section = re.search(r"^## Metrics.*?(?=^## |\Z)", text, re.S | re.M)
        for row in (section.group(0) if section else "").splitlines():
            if not row.startswith("|"):
                continue
            cells = row.split("|")
            kind = next((c.strip() for c in cells if c.strip() in ("counter", "gauge", "histogram")),
                        "gauge")
            for name in re.findall(r"`((?:shortener|idservice)_[a-z0-9_]+)", cells[1]):
                if kind == "counter":
                    name = re.sub(r"_total$", "", name)
                families.setdefault(name, Family(name, kind, binary, {"docs"}))
    return families


def load_families(opts) -> dict[str, Family]:
    """The exported families: from --metrics-cache when it exists, else by running the binaries
    (and writing the cache); the docs' tables with --contract."""
    if opts.contract:
        print("drift: WARNING: metric families from the docs' tables, NOT from the binaries")
        return families_from_docs(opts.repo)
    cache = opts.metrics_cache
    if cache and cache.exists():
        return exported_metrics.from_json(cache.read_text())
    bin_dir = opts.bin_dir
    if bin_dir is None:
        built = subprocess.run(["cargo", "build", "-q", "-p", "id-service", "-p", "shortener"],
                               cwd=opts.repo)
        if built.returncode != 0:
            raise SystemExit("cargo build of id-service and shortener failed")
        bin_dir = opts.repo / "target" / "debug"
    started = time.monotonic()
    try:
        families = exported_metrics.discover(bin_dir, exported_metrics.database_url())
    except exported_metrics.Failure as e:
        raise SystemExit(f"drift: cannot learn the exported metrics: {e}")
    for binary in BINARIES:
        mine = sorted(n for n, f in families.items() if f.binary == binary)
        print(f"drift: {binary} exports {len(mine)} metric families "
              f"({time.monotonic() - started:.1f}s): {', '.join(mine)}")
    if cache:
        cache.write_text(exported_metrics.to_json(families))
    return families


# --------------------------------------------------------------------------------------------
# Self-test: the checker must notice each kind of drift.


def mutations():
    def deploy(docs, name):
        return next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)

    def main_container(docs, name):
        return deploy(docs, name)["spec"]["template"]["spec"]["containers"][0]

    def readiness_path(docs):
        main_container(docs, "shortener")["readinessProbe"]["httpGet"]["path"] = "/ready"

    def liveness_port(docs):
        main_container(docs, "id-service")["livenessProbe"]["httpGet"]["port"] = "grpc"

    def unknown_env(docs):
        main_container(docs, "shortener").setdefault("env", []).append(
            {"name": "SHORTENER_LISTEN_ADDR", "value": "0.0.0.0:8080"})

    def configmap_env(docs):
        cm = next(d for d in docs if d["kind"] == "ConfigMap"
                  and d["metadata"]["name"].startswith("id-service-config"))
        cm["data"]["ID_SERVICE_BLOCK_SIZE"] = "1000"

    def wrong_subcommand(docs):
        main_container(docs, "shortener")["args"] = ["server"]

    def migrate_init(docs):
        deploy(docs, "id-service")["spec"]["template"]["spec"]["initContainers"][0]["args"] = []

    def admin_port_moved(docs):
        cm = next(d for d in docs if d["kind"] == "ConfigMap"
                  and d["metadata"]["name"].startswith("shortener-config"))
        cm["data"]["SHORTENER_ADMIN_ADDR"] = "0.0.0.0:9999"

    def grpc_probe_port(docs):
        main_container(docs, "shortener")["startupProbe"] = {"grpc": {"port": 50051}}

    def grace(docs):
        deploy(docs, "shortener")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 20

    def root_fs(docs):
        main_container(docs, "id-service")["securityContext"]["readOnlyRootFilesystem"] = False

    def service_target(docs):
        svc = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "id-service")
        svc["spec"]["ports"][0]["targetPort"] = "grcp"

    def no_auth(docs):
        main_container(docs, "id-service").pop("args", None)

    def both_auth(docs):
        main_container(docs, "id-service").setdefault("env", []).append(
            {"name": "ID_SERVICE_TOKENS_FILE", "value": "/tmp/tokens.toml"})

    def key_file(docs):
        env = main_container(docs, "shortener")["env"]
        next(e for e in env if e["name"] == "SHORTENER_KEY_FILE")["value"] = "/etc/shortener/code.key"

    def console_public(docs):
        ing = next(d for d in docs if d["kind"] == "Ingress")
        paths = ing["spec"]["rules"][0]["http"]["paths"]
        ing["spec"]["rules"][0]["http"]["paths"] = [p for p in paths if p["path"] != "/console"]

    return [console_public, no_auth, both_auth, key_file, readiness_path, liveness_port, unknown_env, configmap_env, wrong_subcommand,
            migrate_init, admin_port_moved, grpc_probe_port, grace, root_fs, service_target]


def monitoring_mutations():
    """Breaks of the alert rules and the dashboard; they need an overlay with the monitoring
    component."""
    def edit_dashboard(docs, change):
        cm = next(d for d in docs if d["kind"] == "ConfigMap"
                  and (d["metadata"].get("labels") or {}).get("grafana_dashboard") == "1")
        key = next(iter(cm["data"]))
        dash = json.loads(cm["data"][key])
        change(dash)
        cm["data"][key] = json.dumps(dash)

    def targets(dash):
        for panel in dash.get("panels", []):
            for inner in [panel, *panel.get("panels", [])]:
                yield from inner.get("targets", [])

    def dashboard_unknown_metric(docs):
        # A panel charting a series nobody exports (a typo of shortener_redirects_total).
        def change(dash):
            next(t for t in targets(dash) if "expr" in t)["expr"] = \
                "sum(rate(shortener_redirect_total[5m]))"
        edit_dashboard(docs, change)

    def dashboard_counter_without_total(docs):
        # A counter queried by its family name: Prometheus stores only shortener_creates_total.
        def change(dash):
            for t in targets(dash):
                t["expr"] = t.get("expr", "").replace("shortener_creates_total", "shortener_creates")
        edit_dashboard(docs, change)

    def dashboard_uncharted_family(docs):
        # Every panel query of an exported family removed: the family is no longer charted.
        def change(dash):
            for panel in dash.get("panels", []):
                for inner in [panel, *panel.get("panels", [])]:
                    inner["targets"] = [t for t in inner.get("targets", [])
                                        if "idservice_segments_total" not in t.get("expr", "")]
        edit_dashboard(docs, change)

    def alert_unknown_metric(docs):
        rule_doc = next(d for d in docs if d["kind"] == "PrometheusRule")
        rule_doc["spec"]["groups"][0]["rules"][0]["expr"] = "sum(shortener_links_total) > 0"

    return [dashboard_unknown_metric, dashboard_counter_without_total, dashboard_uncharted_family,
            alert_unknown_metric]


def has_dashboard(docs: list[dict]) -> bool:
    return any(d["kind"] == "ConfigMap"
               and (d["metadata"].get("labels") or {}).get("grafana_dashboard") == "1" for d in docs)


def self_test(helps: HelpSource, families: dict[str, Family], paths: list[Path]) -> int:
    """Each mutation must be caught: the general ones on the first overlay, the monitoring ones
    on the first overlay that renders the dashboard, the Ingress ones on the first that renders
    certificates per host (components/branded-domains; none rendered, none tried)."""
    rendered = [[d for d in yaml.safe_load_all(p.read_text()) if d] for p in paths]
    with_dashboard = next((docs for docs in rendered if has_dashboard(docs)), None)
    if with_dashboard is None:
        print("self-test: no overlay renders the Grafana dashboard (components/monitoring)")
        return 1
    plan = [(rendered[0], m) for m in mutations()] + \
        [(with_dashboard, m) for m in monitoring_mutations()]
    with_hosts = next((d for d in rendered if ingress_check.renders_certificates_per_host(d)), None)
    if with_hosts is None:
        print("self-test: note: no overlay renders certificates per host "
              "(components/branded-domains): its breaks are not tried")
    else:
        plan += [(with_hosts, m) for m in ingress_check.mutations()]
    with_clusters = next((d for d in rendered if cnpg_check.renders_clusters(d)), None)
    if with_clusters is None:
        print("self-test: note: no overlay renders CloudNativePG clusters (overlays/prod-cnpg): "
              "its breaks are not tried")
    else:
        plan += [(with_clusters, m) for m in cnpg_check.mutations()]
    for docs in {id(d): d for d, _ in plan}.values():
        base = Checker(helps, families)
        base.check_overlay("self-test", copy.deepcopy(docs))
        if base.errors:
            print("self-test: the unmodified manifests already fail:", *base.errors, sep="\n  ")
            return 1
    failed = 0
    for problem in exported_metrics.exposition_self_test():
        print(f"self-test: reading /metrics: {problem}")
        failed += 1
    if not failed:
        print("self-test: reads families from OpenMetrics and Prometheus 0.0.4 text alike")
    for docs, mutate in plan:
        mutated = copy.deepcopy(docs)
        mutate(mutated)
        checker = Checker(helps, families)
        checker.check_overlay("self-test", mutated)
        if checker.errors:
            print(f"self-test: caught {mutate.__name__}: {checker.errors[0]}")
        else:
            print(f"self-test: MISSED {mutate.__name__}")
            failed += 1
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[2])
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--bin-dir", type=Path, help="directory with built id-service and shortener")
    src.add_argument("--contract", action="store_true",
                     help="use the written contract instead of the binaries' --help")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--metrics-cache", type=Path,
                    help="JSON of the exported metric families: read when it exists, else "
                         "learnt by running the binaries and written there")
    ap.add_argument("rendered", nargs="+", help="NAME=FILE of a rendered overlay")
    opts = ap.parse_args()

    helps = HelpSource(opts.repo, opts.bin_dir, opts.contract)
    if opts.contract:
        print("drift: WARNING: checking against the written contract, NOT the binaries' --help")
    elif not opts.self_test:
        origin = opts.bin_dir or "cargo run"
        for binary in BINARIES:
            names = set(helps.accepted(binary, DEFAULT_SUBCOMMAND[binary]).envs)
            print(f"drift: {binary} ({origin}) accepts {', '.join(sorted(names)) or 'nothing'}")
    families = load_families(opts)
    if opts.self_test:
        return self_test(helps, families, [Path(r.rpartition("=")[2]) for r in opts.rendered])

    errors = [] if opts.contract else exported_metrics.check_not_producible(opts.repo)
    checker = Checker(helps, families)
    checker.errors.extend(errors)
    for item in opts.rendered:
        name, _, path = item.rpartition("=")
        docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
        checker.check_overlay(name or path, docs)
    for w in checker.warnings:
        print(f"drift: note: {w}")
    if checker.checked_containers == 0:
        checker.errors.append("no id-service or shortener container found in the manifests")
    if checker.errors:
        print(*(f"drift: FAIL {e}" for e in checker.errors), sep="\n")
        return 1
    print(f"drift: ok ({checker.checked_containers} containers in {len(opts.rendered)} overlays)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
