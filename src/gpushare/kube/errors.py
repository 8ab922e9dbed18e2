"""The three ways a call to a cluster fails, which every caller tells apart.

A grader that cannot read the cluster is "could not grade" (exit 2), never the learner's
failure: that needs ``KubeconfigError`` (we cannot even say where to go) and ``Unreachable``
(nobody answered) kept apart from ``ApiError`` (the apiserver answered no, in its own words).
"""

from __future__ import annotations


class ApiError(Exception):
    """The apiserver answered with an error status (its Status message is kept verbatim)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class Unreachable(Exception):
    """No apiserver answered at ``server``."""

    def __init__(self, server: str, detail: str) -> None:
        super().__init__(f"cannot reach the Kubernetes API at {server}: {detail}")


class KubeconfigError(Exception):
    """The kubeconfig is missing or unusable."""
