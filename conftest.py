"""Root conftest: makes ``pytest graders/`` work from a plain checkout.

It registers gpushare's pytest plugin (options --workdir, --kubeconfig, --lang, --json, ...,
and the lab fixtures). The plugin stays dormant unless grader checks are collected, so
``pytest tests/`` never starts a cluster by itself.
"""

import sys
from pathlib import Path

try:
    import gpushare  # noqa: F401
except ImportError:  # a checkout without `make setup`: use the source tree directly
    sys.path.insert(0, str(Path(__file__).parent / "src"))

pytest_plugins = ["gpushare.grading.plugin"]
