#!/usr/bin/env python3
"""The metric families the two binaries really export, learnt by running them.

Runs, each on free 127.0.0.1 ports and stopped afterwards:

  * an id-service on a throwaway PostgreSQL database, with a tokens file;
  * an embedded shortener (SQLite in a temporary directory);
  * a distributed shortener (PostgreSQL, a second throwaway database, leasing its IDs from that
    id-service);

then makes each do the things whose series appear only once they happened (a family with labels
is not described until it has a series), scrapes every admin `/metrics`, and reads the families
from the `# TYPE` lines. The databases are dropped on the way out.

    exported_metrics.py --bin-dir DIR [--database-url URL] [--json]

PostgreSQL: --database-url, else $DEPLOY_CHECK_DATABASE_URL, else $TEST_DATABASE_URL, else
postgres://postgres@127.0.0.1:5432/postgres (a role that may CREATE DATABASE; CI has one). Its
absence is an error, never a reason to skip. Needs `psql` (on PATH, in $PG_BIN_DIR or in
/usr/lib/postgresql/*/bin) and `curl` with HTTP/2 (for the few gRPC calls).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres"
# A fixed code-space key: the runs here never keep a link.
TEST_CODE_KEY = "5a" * 32
TEST_API_KEY = "deploy-check-metrics-0001"
READY_TIMEOUT = 30.0

# Families no run here can produce, with the reason. Each must still be named in the binary's
# sources (checked below), so a rename there fails the check instead of leaving a stale name.
NOT_PRODUCIBLE = {
    # Described only while SHORTENER_DATABASE_READ_URL is set, and the node refuses to start
    # unless that URL leads to a server in recovery: a streaming replica, which a check cannot
    # set up in seconds.
    "shortener_replica_reads": ("shortener", "counter"),
    "shortener_replica_fallbacks": ("shortener", "counter"),
    "shortener_replica_available": ("shortener", "gauge"),
    "shortener_replica_lag_bytes": ("shortener", "gauge"),
}
SOURCES = {"shortener": "shortener/src", "id-service": "id-service/src"}


@dataclass
class Family:
    """One metric family: its OpenMetrics name (counters without `_total`) and type."""

    name: str
    kind: str
    binary: str
    runs: set[str] = field(default_factory=set)
    samples: set[str] = field(default_factory=set)

    def series(self) -> set[str]:
        """The series names PromQL sees for this family."""
        names = set(self.samples)
        if self.kind == "counter":
            names.add(self.name + "_total")
        elif self.kind in ("histogram", "gaugehistogram"):
            names.update(self.name + s for s in ("_bucket", "_sum", "_count"))
        elif self.kind == "summary":
            names.update({self.name, self.name + "_sum", self.name + "_count"})
        else:
            names.add(self.name)
        return names


SAMPLE_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)")


def parse_exposition(text: str) -> dict[str, tuple[str, set[str]]]:
    """`# TYPE` lines of a Prometheus or OpenMetrics exposition -> {family: (type, samples)}.

    OpenMetrics names a counter's family without `_total` (`# TYPE x counter`, sample
    `x_total`); the older Prometheus text format puts `_total` in the TYPE line too. Both end up
    as the family `x`. A sample without a TYPE line is a family of type `unknown`."""
    families: dict[str, tuple[str, set[str]]] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) < 4:
                continue
            name, kind = parts[2], parts[3]
            if kind == "counter" and name.endswith("_total"):
                name = name[: -len("_total")]
            families.setdefault(name, (kind, set()))
    suffixes = ("_total", "_created", "_bucket", "_sum", "_count", "_gsum", "_gcount", "_info")
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            continue
        sample = m.group(1)
        owner = sample if sample in families else next(
            (sample[: -len(s)] for s in suffixes
             if sample.endswith(s) and sample[: -len(s)] in families), None)
        if owner is None:
            families[sample] = ("unknown", {sample})
        else:
            families[owner][1].add(sample)
    return families


def exposition_self_test() -> list[str]:
    """parse_exposition on both text formats; returns what it got wrong."""
    openmetrics = (
        "# TYPE a_requests counter\na_requests_total{code=\"200\"} 1\n"
        "# TYPE a_latency_seconds histogram\na_latency_seconds_bucket{le=\"+Inf\"} 1\n"
        "a_latency_seconds_sum 0.1\na_latency_seconds_count 1\n"
        "# TYPE a_empty counter\n# EOF\n")
    prometheus = (
        "# TYPE a_requests_total counter\na_requests_total 1\n"
        "# TYPE a_in_flight gauge\na_in_flight 2\nuntyped_thing 3\n")
    want = {
        "openmetrics": (openmetrics, {"a_requests": ("counter", {"a_requests_total"}),
                                      "a_latency_seconds": ("histogram", {"a_latency_seconds_bucket",
                                                                          "a_latency_seconds_sum",
                                                                          "a_latency_seconds_count"}),
                                      "a_empty": ("counter", set())}),
        "prometheus 0.0.4": (prometheus, {"a_requests": ("counter", {"a_requests_total"}),
                                          "a_in_flight": ("gauge", {"a_in_flight"}),
                                          "untyped_thing": ("unknown", {"untyped_thing"})}),
    }
    wrong = []
    for fmt, (text, expected) in want.items():
        got = parse_exposition(text)
        if got != expected:
            wrong.append(f"{fmt}: parsed {got}, expected {expected}")
    if Family("a_empty", "counter", "x").series() != {"a_empty_total"}:
        wrong.append("a counter family's series is not its name with _total")
    return wrong


# --------------------------------------------------------------------------------------------
# Running the binaries.


class Failure(Exception):
    pass


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def http(method: str, url: str, body: bytes | None = None, headers: dict | None = None,
         timeout: float = 10.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get_no_redirect(url: str) -> int:
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def proto_fields(*fields: tuple[int, int | str]) -> bytes:
    """A protobuf message of varint and string fields, enough for the calls made here."""
    out = b""
    for number, value in fields:
        if isinstance(value, str):
            data = value.encode()
            out += varint(number << 3 | 2) + varint(len(data)) + data
        else:
            out += varint(number << 3) + varint(value)
    return out


def grpc_call(addr: str, method: str, message: bytes, token: str) -> str:
    """One unary gRPC call through curl's HTTP/2; returns the grpc-status ('' if none came)."""
    frame = b"\0" + len(message).to_bytes(4, "big") + message
    proc = subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", "-X", "POST", "--max-time", "10",
         "-H", "content-type: application/grpc", "-H", "te: trailers",
         "-H", f"authorization: Bearer {token}", "--data-binary", "@-",
         "-D", "-", "-o", "/dev/null", f"http://{addr}/{method}"],
        input=frame, capture_output=True)
    if proc.returncode != 0:
        raise Failure(f"gRPC {method} through curl failed: {proc.stderr.decode().strip()}")
    m = re.search(rb"(?im)^grpc-status:\s*(\d+)", proc.stdout)
    return m.group(1).decode() if m else ""


class Lab:
    """Temporary directory, processes and databases of one discovery run; all undone on exit."""

    def __init__(self, bin_dir: Path, database_url: str):
        self.bin_dir, self.database_url = bin_dir, database_url
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []
        self.databases: list[str] = []
        self.dir = Path(tempfile.mkdtemp(prefix="deploy-check-metrics."))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        failed = exc[0] is not None
        for name, proc, log in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc, log in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if failed and log.exists():
                tail = log.read_text(errors="replace").splitlines()[-20:]
                print(f"--- last lines of {name}'s log ---", *tail, sep="\n", file=sys.stderr)
        for db in self.databases:
            self.psql(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def binary(self, name: str) -> str:
        path = (self.bin_dir / name).resolve()
        if not os.access(path, os.X_OK):
            raise Failure(f"{path} is not an executable (build it: cargo build -p {name})")
        return str(path)

    def psql(self, sql: str, database: str | None = None, check: bool = True) -> str:
        url = self.database_url if database is None else self.url_of(database)
        proc = subprocess.run([psql_path(), url, "-qXAtv", "ON_ERROR_STOP=1", "-c", sql],
                              capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise Failure(f"psql ({sql.split()[0]} ...) failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def url_of(self, database: str) -> str:
        base, _, rest = self.database_url.partition("?")
        base = base.rsplit("/", 1)[0] + "/" + database
        return base + ("?" + rest if rest else "")

    def create_database(self, suffix: str) -> str:
        name = f"deploy_check_{secrets.token_hex(5)}_{suffix}"
        self.psql(f"CREATE DATABASE {name}")
        self.databases.append(name)
        return name

    def start(self, name: str, argv: list[str], env: dict[str, str], admin: int) -> str:
        """Starts a server and waits for its /readyz; returns its admin base URL."""
        log = self.dir / f"{name}.log"
        clean = {k: v for k, v in os.environ.items()
                 if not (k.startswith(("SHORTENER_", "ID_SERVICE_")) or k == "DATABASE_URL")}
        full_env = {**clean, "RUST_LOG": "warn", "NO_COLOR": "1", **env}
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.dir)
        self.procs.append((name, proc, log))
        base = f"http://127.0.0.1:{admin}"
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise Failure(f"{name} exited with {proc.returncode} before it was ready")
            try:
                if http("GET", base + "/readyz", timeout=1)[0] == 200:
                    return base
            except OSError:
                pass
            time.sleep(0.05)
        raise Failure(f"{name} not ready within {READY_TIMEOUT:.0f}s")


def wait_for(what: str, condition, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failure(f"timed out waiting for {what}")
        time.sleep(0.05)


def scrape(admin: str) -> str:
    status, body = http("GET", admin + "/metrics")
    if status != 200:
        raise Failure(f"GET {admin}/metrics answered {status}")
    return body.decode()


# --------------------------------------------------------------------------------------------
# What each run does before it is scraped.


def exercise_shortener(http_base: str) -> None:
    """A create, its redirect, an unauthenticated create, a YOURLS expand, and unknown codes past
    the 404 limit (the node runs with a 404 burst of 1): the request families with labels get
    their series."""
    body = json.dumps({"url": "https://example.com/deploy-check"}).encode()
    headers = {"Content-Type": "application/json"}
    status, answer = http("POST", http_base + "/api/v1/links", body,
                          {**headers, "Authorization": f"Bearer {TEST_API_KEY}"})
    if status not in (200, 201):
        raise Failure(f"POST /api/v1/links answered {status}: {answer[:200]!r}")
    code = json.loads(answer)["code"]
    get_no_redirect(f"{http_base}/{code}")
    status, _ = http("POST", http_base + "/api/v1/links", body, headers)
    if status != 401:
        raise Failure(f"POST /api/v1/links without a key answered {status}, expected 401")
    status, answer = http("GET", f"{http_base}/yourls-api.php?action=expand&format=json"
                          f"&shorturl={code}&signature={TEST_API_KEY}")
    if status != 200:
        raise Failure(f"YOURLS expand answered {status}: {answer[:200]!r}")
    statuses = {get_no_redirect(f"{http_base}/zzzzzz{i}") for i in range(3)}
    if 429 not in statuses:
        raise Failure(f"unknown codes past the 404 burst answered {sorted(statuses)}, expected a 429")


def exercise_id_service(lab: Lab, db: str, grpc: str, json_base: str, admin: str,
                        token: str, tokens_file: Path) -> None:
    """Every kind of call and refusal the families count, over JSON and gRPC."""
    def allocate(namespace: str, bearer: str) -> int:
        return http("POST", f"{json_base}/v1/namespaces/{namespace}/ids:allocate",
                    b'{"count": 3}', {"Content-Type": "application/json",
                                      "Authorization": f"Bearer {bearer}"})[0]

    expect = [
        ("AllocateIds", allocate("links", token), 200),
        ("AllocateIds with an unknown token", allocate("links", "idsvc_unknown"), 401),
        # The caller's namespaces do not include it: a caller refusal.
        ("AllocateIds outside the caller's namespaces", allocate("other", token), 403),
        # In the caller's namespaces but never created: an AllocateIds error after admission.
        ("AllocateIds of a namespace never created", allocate("absent", token), 404),
        # Empty requests: each method's counter gets an invalid_argument series.
        ("empty LeaseBlock", grpc_call(grpc, "idalloc.v1.IdAllocator/LeaseBlock", b"", token), "3"),
        ("empty LookupId", grpc_call(grpc, "idalloc.v1.IdAllocator/LookupId", b"", token), "3"),
        ("empty DescribeNamespace",
         grpc_call(grpc, "idalloc.v1.NamespaceAdmin/DescribeNamespace", b"", token), "3"),
    ]
    # The ledger made to look restored on another timeline, and a caller reporting a high water
    # above the cursor: the next grant jumps the cursor for both causes.
    lab.psql("UPDATE id_namespaces SET pg_timeline = pg_timeline + 1000 WHERE name = 'links'",
             database=db)
    last = int(lab.psql("SELECT last_value FROM pg_sequences s JOIN id_namespaces n "
                        "ON s.sequencename = n.seq::text WHERE n.name = 'links'", database=db) or 0)
    lease = proto_fields((1, "links"), (2, 10), (3, "deploy-check"), (4, last + 100))
    expect.append(("LeaseBlock after a timeline change",
                   grpc_call(grpc, "idalloc.v1.IdAllocator/LeaseBlock", lease, token), "0"))
    for what, got, wanted in expect:
        if got != wanted:
            raise Failure(f"id-service: {what} answered {got!r}, expected {wanted!r}")
    # A changed tokens file is reloaded (the service checks it every 200 ms here).
    tokens_file.write_text(tokens_file.read_text() + "\n# touched by deploy/check\n")
    wait_for("the tokens file reload", lambda: "idservice_tokens_reloads_total{" in scrape(admin))


def discover(bin_dir: Path, database_url: str) -> dict[str, Family]:
    """Runs the binaries and returns every family they export, keyed by name."""
    if psql_path() is None:
        raise Failure("`psql` not found (PATH, $PG_BIN_DIR, /usr/lib/postgresql/*/bin)")
    if shutil.which("curl") is None:
        raise Failure("`curl` is not on PATH (it makes the few gRPC calls, over HTTP/2)")
    families: dict[str, Family] = {}

    def collect(binary: str, run: str, text: str) -> None:
        for name, (kind, samples) in parse_exposition(text).items():
            fam = families.setdefault(name, Family(name, kind, binary))
            if fam.kind != kind or fam.binary != binary:
                raise Failure(f"{name} is a {kind} of {binary} in run {run}, "
                              f"a {fam.kind} of {fam.binary} before")
            fam.runs.add(run)
            fam.samples |= samples

    with Lab(bin_dir, database_url) as lab:
        shortener, id_service = lab.binary("shortener"), lab.binary("id-service")
        probe = subprocess.run([psql_path(), database_url, "-qXAtc", "SELECT 1"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            raise Failure(f"no PostgreSQL at {redact(database_url)} ({probe.stderr.strip()}); "
                          "the metric check needs one (set DEPLOY_CHECK_DATABASE_URL)")
        ids_db, links_db = lab.create_database("ids"), lab.create_database("links")

        tokens = lab.dir / "tokens.toml"
        added = subprocess.run(
            [id_service, "tokens", "add", "--file", str(tokens), "--name", "shortener",
             "--namespaces", "links,absent", "--scopes", "lease,allocate,lookup,admin",
             "--unlimited"], capture_output=True, text=True)
        if added.returncode != 0:
            raise Failure(f"id-service tokens add failed: {added.stderr.strip()}")
        token = added.stdout.strip()

        grpc, json_port, admin = free_ports(3)
        id_admin = lab.start("id-service", [id_service], {
            "DATABASE_URL": lab.url_of(ids_db),
            "ID_SERVICE_TOKENS_FILE": str(tokens),
            "ID_SERVICE_TOKENS_RELOAD_INTERVAL": "200ms",
            "ID_SERVICE_NAMESPACES": "links",
            "ID_SERVICE_GRPC_ADDR": f"127.0.0.1:{grpc}",
            "ID_SERVICE_HTTP_ADDR": f"127.0.0.1:{json_port}",
            "ID_SERVICE_ADMIN_ADDR": f"127.0.0.1:{admin}",
        }, admin)

        def node_env(http_port: int, grpc_port: int, admin_port: int) -> dict[str, str]:
            return {
                "SHORTENER_HTTP_ADDR": f"127.0.0.1:{http_port}",
                "SHORTENER_GRPC_ADDR": f"127.0.0.1:{grpc_port}",
                "SHORTENER_ADMIN_ADDR": f"127.0.0.1:{admin_port}",
                "SHORTENER_KEY": TEST_CODE_KEY,
                "SHORTENER_API_KEYS": TEST_API_KEY,
                "SHORTENER_NOT_FOUND_RATE": "1",
                "SHORTENER_NOT_FOUND_BURST": "1",
                # The webhook worker polls at this interval (at most 1 s) and describes the
                # outbox gauges after its first poll: make that come at once.
                "SHORTENER_CLICK_FLUSH_INTERVAL_MS": "100",
                # A compatible API, so that its request family gets a series.
                "SHORTENER_COMPAT": "yourls",
            }

        nodes = {}
        ports = free_ports(3)
        nodes["embedded"] = (ports[0], lab.start("shortener (embedded)", [shortener, "serve"], {
            **node_env(*ports), "SHORTENER_DATA_DIR": str(lab.dir / "data")}, ports[2]))
        ports = free_ports(3)
        nodes["postgres"] = (ports[0], lab.start("shortener (PostgreSQL)", [shortener, "serve"], {
            **node_env(*ports),
            "DATABASE_URL": lab.url_of(links_db),
            "SHORTENER_ID_SERVICE": f"http://127.0.0.1:{grpc}",
            "SHORTENER_ID_SERVICE_TOKEN": token,
            "SHORTENER_HOLDER": "deploy-check",
        }, ports[2]))

        for run, (http_port, node_admin) in nodes.items():
            exercise_shortener(f"http://127.0.0.1:{http_port}")
        exercise_id_service(lab, ids_db, f"127.0.0.1:{grpc}", f"http://127.0.0.1:{json_port}",
                            id_admin, token, tokens)

        # Some families are described only after the part behind them measured once (the
        # webhook outbox, a second or so after start): scrape until two scrapes agree.
        runs = [("id-service", "id-service", id_admin)] + [
            ("shortener", f"shortener ({run})", node_admin) for run, (_, node_admin) in nodes.items()]
        for binary, run, base in runs:
            previous: set[str] | None = None
            deadline = time.monotonic() + 5
            while True:
                text = scrape(base)
                names = set(parse_exposition(text))
                if names == previous or time.monotonic() > deadline:
                    break
                previous = names
                time.sleep(0.5)
            collect(binary, run, text)

    for name, (binary, kind) in NOT_PRODUCIBLE.items():
        families.setdefault(name, Family(name, kind, binary, runs={"(not producible, see NOT_PRODUCIBLE)"}))
    return families


def check_not_producible(repo: Path) -> list[str]:
    """Names listed in NOT_PRODUCIBLE that the sources no longer contain."""
    errors = []
    for name, (binary, _) in NOT_PRODUCIBLE.items():
        text = "".join(p.read_text(errors="replace") for p in (repo / SOURCES[binary]).rglob("*.rs"))
        if f'"{name}"' not in text:
            errors.append(f"{name} is listed as not producible here, but {SOURCES[binary]} no "
                          "longer names it: update NOT_PRODUCIBLE in deploy/tools/exported_metrics.py")
    return errors


def psql_path() -> str | None:
    """psql on PATH, else in $PG_BIN_DIR, else in the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("psql")
    if found:
        return found
    dirs = [os.environ.get("PG_BIN_DIR", "")]
    dirs += sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                   key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, reverse=True)
    return next((str(Path(d) / "psql") for d in dirs if d and os.access(Path(d) / "psql", os.X_OK)), None)


def redact(url: str) -> str:
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)


def database_url(explicit: str | None = None) -> str:
    return (explicit or os.environ.get("DEPLOY_CHECK_DATABASE_URL")
            or os.environ.get("TEST_DATABASE_URL") or DEFAULT_DATABASE_URL)


def to_json(families: dict[str, Family]) -> str:
    return json.dumps({n: {"type": f.kind, "binary": f.binary, "runs": sorted(f.runs),
                           "series": sorted(f.series())}
                       for n, f in sorted(families.items())}, indent=1)


def from_json(text: str) -> dict[str, Family]:
    data = json.loads(text)
    return {n: Family(n, d["type"], d["binary"], set(d["runs"]), set(d["series"]))
            for n, d in data.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", type=Path, required=True)
    ap.add_argument("--database-url")
    ap.add_argument("--json", action="store_true", help="print the families as JSON")
    opts = ap.parse_args()
    try:
        families = discover(opts.bin_dir, database_url(opts.database_url))
    except Failure as e:
        print(f"exported_metrics: {e}", file=sys.stderr)
        return 1
    if opts.json:
        print(to_json(families))
    else:
        for f in sorted(families.values(), key=lambda f: (f.binary, f.name)):
            print(f"{f.binary:10} {f.kind:9} {f.name}  [{', '.join(sorted(f.runs))}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
