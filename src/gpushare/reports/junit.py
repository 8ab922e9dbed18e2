"""JUnit XML (xunit2) for ``gpushare grade``, shaped like pytest's ``--junitxml``.

One ``testcase`` per check (classname and name as pytest gives them), a ``failure`` whose
message is the learner's feedback, and the score, seed and versions as testsuite properties,
so an LMS reads the same thing from either entry point.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

from gpushare.reports import clean
from gpushare.reports.results import Report, write_atomic


def write(
    report: Report,
    path: Path,
    *,
    classnames: dict[str, str],
    durations: dict[str, float],
    headline: dict[str, str],
) -> None:
    errors = [c for c in report.checks if c.error]
    failures = [c for c in report.checks if not c.passed and not c.error]
    root = ET.Element("testsuites", name="gpushare")
    suite = ET.SubElement(
        root,
        "testsuite",
        name="gpushare",
        errors=str(len(errors)),
        failures=str(len(failures)),
        skipped="0",
        tests=str(len(report.checks)),
        time=f"{report.execution_time:.3f}",
        timestamp=datetime.now(UTC).isoformat(timespec="seconds"),
        hostname=socket.gethostname(),
    )
    props = ET.SubElement(suite, "properties")
    for name, value in report.properties().items():  # known names only (results.py)
        ET.SubElement(props, "property", name=name, value=clean.line(value))
    for check in report.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=classnames[check.nodeid],
            name=check.nodeid.rsplit("::", 1)[-1],
            time=f"{durations.get(check.nodeid, 0.0):.3f}",
        )
        if not check.passed:
            # learners' files and script output may hold what XML 1.0 cannot carry, and escapes
            # a CI log would play on a terminal (see reports.clean)
            text = clean.text(f"{headline[check.number]}\n{report.said(check)}")
            # an <error> when the check could not judge (cluster unreadable, a grader bug):
            # not the learner's failure, and CI dashboards tell the two apart
            failure = ET.SubElement(case, "error" if check.error else "failure", message=text)
            failure.text = text
    write_atomic(path, ET.tostring(root, encoding="utf-8", xml_declaration=True))
