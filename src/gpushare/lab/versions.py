"""Kept until h17 and h18a land (their reports/results.py and submissions/snapshot.py import it
from here): the pins are :mod:`gpushare.versions`, at the base; remove this file once nothing
imports ``gpushare.lab.versions``."""

from gpushare.versions import COMPONENTS, ETCD, KUBERNETES, KUBERNETES_STAGING, KWOK

__all__ = ["COMPONENTS", "ETCD", "KUBERNETES", "KUBERNETES_STAGING", "KWOK"]
