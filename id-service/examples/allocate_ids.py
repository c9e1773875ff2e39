"""Allocate IDs from the id-service in one call, from Python with grpcio.

Stubs come from the contract with grpcio-tools (run from the repository root):

    python -m grpc_tools.protoc -I proto/proto --python_out=gen --grpc_python_out=gen \
        idalloc/v1/idalloc.proto

Then, with a caller's token (from `id-service tokens add ... --scopes allocate --ids-per-second N`):

    ID_SERVICE_CALLER_TOKEN=idsvc_... PYTHONPATH=gen \
        python id-service/examples/allocate_ids.py --target 127.0.0.1:50051 \
        --namespace orders --count 100

prints {"ranges": [[start, end], ...]}: exactly `count` IDs as half-open ranges. A quota
refusal (RESOURCE_EXHAUSTED with `retry-after-ms`) is retried after the advised delay, up to
--attempts times; every other error is final and ends the program with status 1.
"""

import argparse
import json
import os
import sys
import time

import grpc
from idalloc.v1 import idalloc_pb2, idalloc_pb2_grpc


def retry_after(error: grpc.RpcError):
    """The server's retry advice in seconds, or None (then retrying will not help)."""
    trailers = dict(error.trailing_metadata() or ())
    if "retry-after-ms" in trailers:
        return int(trailers["retry-after-ms"]) / 1000
    if "retry-after" in trailers:
        return float(trailers["retry-after"])
    return None


def allocate(stub, token: str, namespace: str, count: int, attempts: int = 3, timeout: float = 5):
    """Returns `count` IDs of `namespace` as a list of (start, end) half-open ranges."""
    request = idalloc_pb2.AllocateIdsRequest(namespace=namespace, count=count)
    metadata = (("authorization", f"Bearer {token}"),)
    for attempt in range(1, attempts + 1):
        try:
            reply = stub.AllocateIds(request, metadata=metadata, timeout=timeout)
            return [(r.start, r.end) for r in reply.ranges]
        except grpc.RpcError as error:
            delay = retry_after(error)
            retryable = error.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE)
            if not retryable or delay is None or attempt == attempts:
                raise
            time.sleep(delay)
    raise AssertionError("unreachable")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051", help="host:port of the id-service")
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--attempts", type=int, default=3)
    args = parser.parse_args()
    token = os.environ.get("ID_SERVICE_CALLER_TOKEN", "")
    with grpc.insecure_channel(args.target) as channel:
        stub = idalloc_pb2_grpc.IdAllocatorStub(channel)
        try:
            ranges = allocate(stub, token, args.namespace, args.count, args.attempts)
        except grpc.RpcError as error:
            print(f"AllocateIds failed: {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
    print(json.dumps({"ranges": [list(r) for r in ranges]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
