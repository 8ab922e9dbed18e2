"""Kept until h17 lands (its grading/session.py imports these from here): the kube room is
:mod:`gpushare.kube`; remove this file once nothing imports ``gpushare.lab.kubeapi``."""

from gpushare.kube.errors import ApiError, KubeconfigError, Unreachable

__all__ = ["ApiError", "KubeconfigError", "Unreachable"]
