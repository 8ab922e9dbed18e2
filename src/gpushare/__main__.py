"""``python -m gpushare`` is the same as the ``gpushare`` console script."""

from gpushare.cli import run

run()
