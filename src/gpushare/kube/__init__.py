"""Talking to a Kubernetes API: which cluster and who we are, one small transport, the verbs.

Layered like lightkube's ``config`` -> client adapter -> core, lowest first:
:mod:`~gpushare.kube.errors` (what can go wrong), :mod:`~gpushare.kube.config` (kubeconfig
precedence, parsing, credentials, identity), :mod:`~gpushare.kube.verbs` (the calls gpushare
makes and how an answer is decoded), :mod:`~gpushare.kube.transport` (our small HTTP client for
the lab's own kubeconfig) and :mod:`~gpushare.kube.official` (the same verbs over the official
``kubernetes`` package, for every kubeconfig a user names), :mod:`~gpushare.kube.connect`
(which of the two a target gets). Nothing here knows the lab: its lifecycle is ``gpushare.lab``.
"""
