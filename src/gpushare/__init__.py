"""gpushare: the autograder for the GPU-sharing Kubernetes lab (time-slicing, MIG, quota)."""

__version__ = "0.1.0"
