"""Why no grade can be taken at all, apart from every heavier module (a grade starts its
background work before it imports them)."""

from __future__ import annotations


class GradeError(Exception):
    """Grading cannot happen (cluster unreachable, bad kubeconfig): one line, exit status 2."""
