"""gpushare: the autograder for the GPU-sharing Kubernetes lab (time-slicing, MIG, quota)."""

__version__ = "0.1.0"


def version() -> str:
    """The version in the installed distribution's metadata (what pip and an image tag see);
    this source's own when it runs uninstalled (a checkout on ``PYTHONPATH``). Imported only
    when asked: importlib.metadata costs every other command a few milliseconds."""
    from importlib import metadata

    try:
        return metadata.version("gpushare")
    except metadata.PackageNotFoundError:
        return __version__
