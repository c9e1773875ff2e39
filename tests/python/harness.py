"""Small helpers for tests/python/run: free ports, readiness, and the closing summary.

Kept in Python (the runner's venv is there anyway) so the runner needs no curl or netcat.
"""

import socket
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path


def free_ports(count: int) -> None:
    """Prints `count` distinct free loopback ports, space-separated."""
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    print(" ".join(str(s.getsockname()[1]) for s in sockets))
    for s in sockets:
        s.close()


def wait_ready(url: str, pid: int, timeout: float) -> None:
    """Waits until `url` answers 200, failing early if process `pid` has exited."""
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            sys.exit(f"the server (pid {pid}) exited before it was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
                last = f"status {response.status}"
        except urllib.error.HTTPError as e:
            last = f"status {e.code}"
        except OSError as e:
            last = str(e)
        time.sleep(0.1)
    sys.exit(f"{url} was not ready within {timeout:.0f}s ({last})")


def summary(*reports: str) -> None:
    """Adds up JUnit reports given as `name=path` (a missing or unreadable one counts as one
    failure; `fail=<reason>` adds one failure from the runner itself), prints
    `N passed, M failed` and exits non-zero when anything failed."""
    passed = failed = skipped = 0
    for report in reports:
        name, _, path = report.partition("=")
        if name == "fail":
            print(f"failed: {path}")
            failed += 1
            continue
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print(f"{name}: no report ({e})")
            failed += 1
            continue
        p = f = s = 0
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                f += 1
            elif case.find("skipped") is not None:
                s += 1
            else:
                p += 1
        # Worded so that a grep for the closing `N passed` line does not count suites twice.
        print(f"{name}: passed {p}, failed {f}, skipped {s}")
        passed, failed, skipped = passed + p, failed + f, skipped + s
    if passed + failed == 0:
        print("no test ran")
        failed = 1
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "free-ports":
        free_ports(int(args[0]))
    elif command == "wait-ready":
        wait_ready(args[0], int(args[1]), float(args[2]))
    elif command == "summary":
        summary(*args)
    else:
        sys.exit(f"unknown command {command}")
