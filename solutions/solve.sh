#!/usr/bin/env bash
# The reference solution, played the way a learner would: kubectl, the lab's files, and the
# waits a learner must make (the namespace's default ServiceAccount, the quota's status, pods
# scheduled). Idempotent: running it again on a solved lab changes nothing.
#
#   solve.sh WORKDIR [STEP ...]      (kubectl on PATH, KUBECONFIG pointing at the lab)
set -euo pipefail

WORKDIR=${1:?usage: solve.sh WORKDIR [STEP ...]}
shift
STEPS=" ${*:-1 2 3 4 5 6 7 8} "
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/workdir" && pwd)
want() { [[ $STEPS == *" $1 "* ]]; }
say() { printf '[solve] %s\n' "$*" >&2; }

mkdir -p "$WORKDIR/k8s" "$WORKDIR/bin" "$WORKDIR/out"
cp "$SRC"/k8s/*.yaml "$WORKDIR/k8s/"
cd "$WORKDIR"

ensure_ns() {
  kubectl get namespace "$1" >/dev/null 2>&1 || kubectl create namespace "$1" >/dev/null
  # pods in a new namespace are refused until its default ServiceAccount exists
  until kubectl get serviceaccount default -n "$1" >/dev/null 2>&1; do sleep 0.2; done
}

wait_scheduled() { # namespace pod...
  local ns=$1; shift
  kubectl wait -n "$ns" --for=condition=PodScheduled --timeout=60s "${@/#/pod/}" >/dev/null
}

status_patch() { # node resource count
  kubectl patch node "$1" --subresource=status --type=merge \
    -p "{\"status\":{\"capacity\":{\"$2\":\"$3\"},\"allocatable\":{\"$2\":\"$3\"}}}" >/dev/null
}

if want 1 || want 7; then
  say "step 1/7: namespaces and the device-plugin ConfigMap"
  ensure_ns gpu-share
  ensure_ns team-a
  kubectl apply -f k8s/device-plugin-configs.yaml >/dev/null
fi

if want 2; then
  say "step 2: config labels and GPU counts"
  kubectl label node lab-node-0 nvidia.com/device-plugin.config=default --overwrite >/dev/null
  kubectl label node lab-node-1 nvidia.com/device-plugin.config=shared --overwrite >/dev/null
  replicas=$(kubectl get configmap device-plugin-configs -n gpu-share -o jsonpath='{.data.shared}' |
    python3 -c 'import sys, yaml; c = yaml.safe_load(sys.stdin)
print(next(r["replicas"] for r in c["sharing"]["timeSlicing"]["resources"]
           if r["name"] == "nvidia.com/gpu"))')
  status_patch lab-node-0 nvidia.com/gpu 2
  status_patch lab-node-1 nvidia.com/gpu $((2 * replicas))
fi

if want 3; then
  say "step 3: the MIG mixed node"
  kubectl label node lab-node-2 nvidia.com/mig.strategy=mixed \
    nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB --overwrite >/dev/null
  status_patch lab-node-2 nvidia.com/mig-1g.10gb 7
fi

if want 4; then
  say "step 4: two pods routed by resource name"
  ensure_ns gpu-share
  kubectl apply -f k8s/mig-job.yaml >/dev/null
  wait_scheduled gpu-share mig-job plain-gpu
fi

if want 5; then
  say "step 5: quota for team-a"
  ensure_ns team-a
  kubectl apply -f k8s/gpu-quota.yaml >/dev/null
  # the apiserver enforces a new quota only once the controller manager filled its status
  kubectl wait -n team-a resourcequota/gpu-quota --timeout=60s \
    --for=jsonpath='{.status.hard.requests\.nvidia\.com/gpu}'=2 >/dev/null
  kubectl apply -f k8s/team-pods.yaml >/dev/null
  wait_scheduled team-a team-a-1 team-a-2
  kubectl apply -f k8s/team-over.yaml >out/quota-denied.txt 2>&1 || true
fi

if want 6; then
  say "step 6: the pre-deploy check"
  cp "$SRC/bin/check-request.sh" bin/check-request.sh
  chmod 755 bin/check-request.sh
fi

if want 7; then
  say "step 7: the isolation table"
  cat >out/isolation.txt <<'TABLE'
TIMESLICING_MEMORY_ISOLATION=no
MPS_MEMORY_ISOLATION=partial
MIG_MEMORY_ISOLATION=yes
TIMESLICING_FAULT_ISOLATION=no
MIG_FAULT_ISOLATION=yes
TABLE
fi

if want 8; then
  say "step 8: placement by labels"
  kubectl apply -f k8s/placement.yaml >/dev/null
  wait_scheduled gpu-share prod-inference notebook batch-train
  kubectl get pod -n gpu-share prod-inference notebook batch-train \
    -o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName --no-headers |
    awk '{print $1 "=" $2}' >out/placement.txt
fi
say "done"
