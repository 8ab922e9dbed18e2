"""Which client a target gets: ours for the lab's own kubeconfig, the official one otherwise.

Measured (docs/performance.md, "The small client"): the official package's import is about
0.19 s (a grade 0.13-0.15 s longer), which the lab's kwokctl-written kubeconfig does not need;
any other kubeconfig may log in in ways only the official loader knows."""

from __future__ import annotations

from gpushare.kube.config import Identity, Target, lab_kubeconfig
from gpushare.kube.official import OfficialClient
from gpushare.kube.transport import Client
from gpushare.kube.verbs import Verbs


def connect(target: Target, timeout: float = 10.0) -> tuple[Verbs, Identity]:
    """A client for ``target`` and who it is; KubeconfigError when it cannot be used.

    Nothing is sent yet: the caller's first request tells whether the cluster answers.
    """
    if len(target.files) == 1 and lab_kubeconfig(target.files[0]):
        ours = Client.from_kubeconfig(target.files[0], target.context, timeout=timeout)
        creds = ours.creds  # read once: the names come with the server and keys
        identity = Identity(
            kubeconfig=target.kubeconfig,
            kubeconfig_source=target.source,
            context=creds.context,
            cluster=creds.cluster,
            server=ours.server,
            user=creds.user,
        )
        return ours, identity
    official = OfficialClient.load(target, timeout=timeout)
    return official, official.identity
