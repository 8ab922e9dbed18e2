"""Talking to a Kubernetes API: which cluster and who we are, one small transport, the verbs.

Lowest first, as lightkube layers ``config`` -> client adapter -> core: errors, config
(kubeconfigs), verbs (the calls, the answers), transport (ours, for the lab's kubeconfig) and
official (the ``kubernetes`` package, for any other), connect (which one). Nothing here knows
the lab: its lifecycle is ``gpushare.lab``.
"""
