"""The lab's root conftest: ``pytest graders/`` grades with gpushare's plugin (dormant for the
lab's own tests in ``tests/``, which call :mod:`gpushare.labkit`)."""

pytest_plugins = ["gpushare.grading.plugin"]
