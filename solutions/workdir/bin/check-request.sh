#!/usr/bin/env bash
# check-request.sh <pod manifest>
#
# Lab step 6, reference solution. For every container asking for more than one nvidia.com/gpu
# print "OVER=<container name>=<count>" and exit 1; otherwise print "OK" and exit 0.
#   - every YAML document of the file is read (yaml.safe_load_all); empty ones are skipped;
#   - only "kind: Pod" documents, and only their spec.containers, are looked at;
#   - a container's count is the larger of limits and requests (a missing side counts 0):
#     asking for 2 on either side is asking for 2;
#   - quantities may be written 2, "2" or '2'.
# Exit 2 (message on stderr) for a usage error, unreadable file, bad YAML or a GPU quantity
# that is not a whole number.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: ${0##*/} <pod manifest>" >&2
    exit 2
fi
if [[ ! -r $1 ]]; then
    echo "${0##*/}: cannot read $1" >&2
    exit 2
fi

exec python3 - "$1" <<'PY'
import sys

import yaml

GPU = "nvidia.com/gpu"


def fail(message):
    print(f"check-request.sh: {message}", file=sys.stderr)
    sys.exit(2)


def gpu_count(value):
    if value is None:
        return 0
    if isinstance(value, bool):
        fail(f"{GPU} must be a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    fail(f"{GPU} must be a whole number, got {value!r}")


def as_dict(value):
    return value if isinstance(value, dict) else {}


def main(path):
    try:
        with open(path, encoding="utf-8") as fh:
            docs = list(yaml.safe_load_all(fh))
    except yaml.YAMLError as err:
        fail(f"{path} is not valid YAML: {err}")
    over = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Pod":
            continue
        containers = as_dict(doc.get("spec")).get("containers") or []
        if not isinstance(containers, list):
            continue
        for container in containers:
            if not isinstance(container, dict):
                continue
            resources = as_dict(container.get("resources"))
            count = max(
                gpu_count(as_dict(resources.get(side)).get(GPU)) for side in ("limits", "requests")
            )
            if count > 1:
                over.append((container.get("name", ""), count))
    for name, count in over:
        print(f"OVER={name}={count}")
    if not over:
        print("OK")
    sys.exit(1 if over else 0)


main(sys.argv[1])
PY
