"""The one place that pins every control-plane component.

Everything that builds, checks or reports a binary version reads it from here, so a bump is
one edit and the cache key (``name@version``) changes with it.
"""

from __future__ import annotations

KWOK = "v0.8.0"
KUBERNETES = "v1.36.3"
# k8s.io staging modules are published as v0.<minor>.<patch> of the same release.
KUBERNETES_STAGING = "v0" + KUBERNETES[2:]
ETCD = "v3.6.16"
# the lab's versions as results, snapshots and `gpushare status` record them
LAB = {"kwok": KWOK, "kubernetes": KUBERNETES, "etcd": ETCD}

# binary name -> (version, Go package it is built from)
COMPONENTS: dict[str, tuple[str, str]] = {
    "kwok": (KWOK, "sigs.k8s.io/kwok/cmd/kwok"),
    "kwokctl": (KWOK, "sigs.k8s.io/kwok/cmd/kwokctl"),
    "kube-apiserver": (KUBERNETES, "k8s.io/kubernetes/cmd/kube-apiserver"),
    "kube-controller-manager": (KUBERNETES, "k8s.io/kubernetes/cmd/kube-controller-manager"),
    "kube-scheduler": (KUBERNETES, "k8s.io/kubernetes/cmd/kube-scheduler"),
    "kubectl": (KUBERNETES, "k8s.io/kubernetes/cmd/kubectl"),
    "etcd": (ETCD, "go.etcd.io/etcd/server/v3"),
}
