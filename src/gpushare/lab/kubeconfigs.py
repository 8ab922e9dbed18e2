"""Kept until h17 lands (its grading/session.py calls ``kubeconfigs.resolve`` and
``kubeconfigs.connect``): the kube room is :mod:`gpushare.kube`; remove this file once nothing
imports ``gpushare.lab.kubeconfigs``."""

from gpushare.kube.config import Identity, Target, resolve
from gpushare.kube.connect import connect

__all__ = ["Identity", "Target", "connect", "resolve"]
