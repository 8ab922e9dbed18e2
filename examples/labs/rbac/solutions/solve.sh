#!/usr/bin/env bash
# The RBAC lab's reference solution, played as a learner would with kubectl.
# Usage: solve.sh WORKDIR [STEP...]  (steps are ignored: each is a line or two)
set -euo pipefail
work="$1"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$work"
cp -R "$here/workdir/." "$work/"
chmod 755 "$work/bin/readonly.sh"
kubectl label namespace shop team=shop --overwrite
kubectl apply -f "$work/rbac.yaml"
