#!/bin/sh
# Allocate IDs from the id-service's JSON endpoint with curl.
#   ID_SERVICE_CALLER_TOKEN=idsvc_... id-service/examples/allocate_ids.sh http://127.0.0.1:8091 orders 100
# prints {"ranges":[[start,end],...]}; on a refusal curl exits non-zero after printing the
# {"error": ..., "message": ...} body (a quota_exceeded refusal also carries Retry-After).
set -eu
base=${1:?usage: $0 BASE_URL NAMESPACE [COUNT]}
namespace=${2:?usage: $0 BASE_URL NAMESPACE [COUNT]}
count=${3:-1}
curl --silent --show-error --fail-with-body \
  -H "Authorization: Bearer ${ID_SERVICE_CALLER_TOKEN:?set ID_SERVICE_CALLER_TOKEN}" \
  -H 'Content-Type: application/json' \
  --data "{\"count\": $count}" \
  "$base/v1/namespaces/$namespace/ids:allocate"
echo
