#!/usr/bin/env bash
# The kind of check script lab platforms use: one kubectl call per fact, pass/fail lines.
# It checks fewer things than gpushare (no file parsing, no script runs, no feedback);
# benchmarks/bench_grade.py times it next to `gpushare grade` in the same run.
#   kubectl_check.sh WORKDIR   (KUBECONFIG and PATH set to the lab's)
WORKDIR=${1:?usage: kubectl_check.sh WORKDIR}
pass=0 fail=0
ok() { if [ "$1" = "$2" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $3"; fi; }
ok "$(kubectl get ns gpu-share -o jsonpath='{.metadata.name}')" gpu-share "namespace gpu-share"
ok "$(kubectl get ns team-a -o jsonpath='{.metadata.name}')" team-a "namespace team-a"
ok "$(kubectl get cm -n gpu-share device-plugin-configs -o jsonpath='{.data.shared}' | grep -c 'replicas: 4')" 1 "shared replicas"
ok "$(kubectl get node lab-node-0 -o jsonpath='{.metadata.labels.nvidia\.com/device-plugin\.config}')" default "node-0 label"
ok "$(kubectl get node lab-node-1 -o jsonpath='{.metadata.labels.nvidia\.com/device-plugin\.config}')" shared "node-1 label"
ok "$(kubectl get node lab-node-1 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" 8 "node-1 gpus"
ok "$(kubectl get node lab-node-2 -o jsonpath='{.status.allocatable.nvidia\.com/mig-1g\.10gb}')" 7 "node-2 mig"
ok "$(kubectl get pod -n gpu-share mig-job -o jsonpath='{.spec.nodeName}')" lab-node-2 "mig-job node"
ok "$(kubectl get quota -n team-a gpu-quota -o jsonpath='{.status.used.requests\.nvidia\.com/gpu}')" 2 "quota used"
ok "$(kubectl get pod -n gpu-share prod-inference -o jsonpath='{.spec.nodeName}')" lab-node-2 "prod-inference node"
ok "$(grep -c 'exceeded quota' "$WORKDIR/out/quota-denied.txt")" 1 "denial captured"
echo "$pass passed, $fail failed"
