"""``gpushare class export``: a class's grades as Canvas's and Moodle's own imports read them.

The class is 47 learners graded by the real ``gpushare class grade`` from the recorded lab
states (``tests/data/class-47.tgz``, made by ``python -m tests.record_class``): names with
commas, quotes, CJK and formula-like starts, two learners of a Canvas bulk download, a real 0,
and an upload cut short (an error row). Each file the export writes is parsed back here by the
rules its LMS's importer applies (the module docstrings of ``gpushare.lms.canvas`` and
``gpushare.lms.moodle`` cite them), never by our own writer's.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tarfile
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest

from gpushare.classroom import gradebook
from gpushare.classroom.identity import folder_name
from gpushare.lms import moodle, plan, roster
from gpushare.reports import messages
from tests.helpers import ROOT, _gpushare

FIXTURE = ROOT / "tests" / "data" / "class-47.tgz"
UNMAPPED = ("learner38", "learner39", "learner40", "@SUM(A1)")  # graded, in no roster row
ABSENT = ("Absent, Amy", "缺席者", "no-show")  # in the roster, never submitted
CANVAS_DOWNLOAD = ("leeminho_4343", "smithjohn_4242")  # named by Canvas's file names
NO_EMAIL = "learner37"  # in the roster without an e-mail address
UNSAFE_ID = "+cmd"  # its SIS Login ID starts like a formula
SIS_ONLY = "learner36"  # in Canvas by SIS Login ID alone
NAMES = {  # display names a gradebook must survive
    "Doe, Jane": "Doe, Jane",
    'Ann "Nan" Li': 'Li, Ann "Nan"',
    "O'Brien": "O'Brien, Pat",
    "张伟": "张伟",
    "王芳, 助教组": "王芳",
    "김민준": "김민준",
    "山田花子": "山田, 花子",
    "=1+2": "=1+2",
}


@pytest.fixture(scope="module")
def class_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("class-47")
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(out)  # our own recording (tests/record_class.py)
    return out


@pytest.fixture(scope="module")
def grades(class_dir: Path) -> dict[str, dict[str, str]]:
    """grades.csv by learner, as a spreadsheet shows it (the formula guard's ' taken off)."""
    table = csv.DictReader(io.StringIO((class_dir / "grades.csv").read_text(encoding="utf-8")))
    return {r["learner"].removeprefix("'"): r for r in table}


def _raw(learner: str) -> str:
    """The learner as the instructor knows them (grades.csv holds the folder name)."""
    return {"%2Drm": "-rm", "Ann %22Nan%22 Li": 'Ann "Nan" Li'}.get(learner, learner)


def _row(grades: dict[str, dict[str, str]], learner: str) -> dict[str, str] | None:
    """grades.csv's row of a roster learner (by its folder name), None for one not graded."""
    return grades.get(folder_name(learner))


@pytest.fixture(scope="module")
def roster_file(grades: dict[str, dict[str, str]], tmp_path_factory: pytest.TempPathFactory):
    """The instructor's roster: everyone graded but UNMAPPED and the Canvas download, plus the
    learners who never submitted; the class-grade roster's columns (file,learner) kept."""
    rows = []
    learners = [_raw(k) for k in grades if k not in UNMAPPED and k not in CANVAS_DOWNLOAD]
    for i, learner in enumerate([*learners, *ABSENT]):
        rows.append(
            {
                "file": f"{learner}.gpushare.tgz",
                "learner": learner,
                "Student": NAMES.get(learner, f"Learner, Number {i}"),
                "ID": "" if learner == SIS_ONLY else str(5000 + i),
                "SIS User ID": "" if learner == SIS_ONLY else f"S{i:04d}",
                "SIS Login ID": "=cmd" if learner == UNSAFE_ID else f"login{i}",
                "Section": "Section A" if i % 2 else "Section B, evening",
                "Email address": "" if learner == NO_EMAIL else f"u{i}@example.edu",
                "username": f"u{i}",
            }
        )
    path = tmp_path_factory.mktemp("roster") / "roster.csv"
    with path.open("w", encoding="utf-8-sig", newline="") as fh:  # as Excel saves it
        out = csv.DictWriter(fh, fieldnames=list(rows[0]))
        out.writeheader()
        out.writerows(rows)
    return path


def run_export(class_dir: Path, *args: str) -> tuple[int, str, str]:
    proc = _gpushare("class", "export", str(class_dir), *args)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture(scope="module")
def exported(class_dir, roster_file, tmp_path_factory) -> tuple[Path, str]:
    to = tmp_path_factory.mktemp("exported")
    rc, stdout, stderr = run_export(
        class_dir,
        "--canvas",
        "--moodle",
        "--roster", str(roster_file),
        "--assignment", "GPU sharing lab",
        "--assignment-id", "4711",
        "--feedback",
        "--to", str(to),
    )  # fmt: skip
    assert rc == 0, stderr
    return to, stdout


# --- the LMSs' parsers, as their importers are written ------------------------------------


def canvas_parse(path: Path) -> dict[str, object]:
    """The file as canvas-lms lib/gradebook_importer.rb reads it (GradebookImporter)."""
    raw = path.read_bytes()
    text = raw.decode("utf-8")  # Ruby's CSV keeps a BOM in the first cell: matched by include?
    lines = text.splitlines()[:3]

    def fields(sep: str) -> int:  # identify_delimiter: ; only if it splits all 3 lines evenly
        counts = {len(next(csv.reader([line], delimiter=sep))) for line in lines}
        return counts.pop() if len(counts) == 1 else 0

    assert not fields(";") > fields(","), "Canvas would read it as semicolon-separated"
    table = [
        r
        for r in csv.reader(io.StringIO(text, newline=""))
        if not re.fullmatch(r"[;, ]+", ",".join(r))
    ]
    table = [[_decimal_comma_to_period(c) for c in r] for r in table]
    header, *rest = table
    # row_has_student_headers? and update_column_count
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    columns = 3
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    columns += 2
    assert "Section" in header[columns - 1], "Invalid header row"
    non_assignment = re.compile(
        "Current Score|Current Points|Current Grade|Final Score|Final "
        "Points|Final Grade|Override Score|Override Grade|Override Status"
    )
    assignments = [
        (i, h) for i, h in enumerate(header) if i >= columns and not non_assignment.search(h)
    ]
    titled = [re.fullmatch(r"(.*)\s\((\d+)\)", h) for _i, h in assignments]
    points: dict[str, str] = {}
    students = []
    for row in rest:
        if "Points Possible" in row[0]:  # check_for_non_student_row
            points = {m[2]: row[i] for (i, _h), m in zip(assignments, titled, strict=True) if m}
            continue
        if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", c, re.I) for c in row):
            continue
        grades = {m[2]: row[i].strip() for (i, _h), m in zip(assignments, titled, strict=True) if m}
        students.append(
            {
                "name": row[0],
                "id": row[1],
                "sis_user_id": row[2],
                "sis_login_id": row[3],
                "section": row[4],
                "grades": grades,
            }
        )
    return {
        "bom": raw.startswith(b"\xef\xbb\xbf"),
        "crlf": b"\r\n" in raw,
        "titles": [m[1] for m in titled if m],
        "points": points,
        "students": students,
    }


def _decimal_comma_to_period(field: str) -> str:
    if not re.fullmatch(r"-?[0-9.,]+%?", field):
        return field
    *parts, last = re.split(r"[,.]", field)
    return f"{''.join(parts)}.{last}" if parts else last


def moodle_parse(path: Path, kind: str) -> dict[str, tuple[float | None, str]]:
    """The file as moodle/moodle reads it: csv_import_reader::load_csv_content (BOM trimmed,
    CR LF to LF, fgetcsv with , and "), then load_data's grade and feedback rules."""
    raw = path.read_bytes()
    assert b'\\"' not in raw  # fgetcsv's escape: never in a file of ours
    text = raw.decode("utf-8").removeprefix("\ufeff")
    text = re.sub(r"\r\n?", "\n", text).strip()
    table = [r for r in csv.reader(io.StringIO(text, newline="")) if r != [""]]
    header, *rest = table
    assert all(len(r) == len(header) for r in rest), "csvweirdcolumns"
    ident = header.index(moodle_header(kind))
    out = {}
    for row in rest:
        value = row[ident].strip()
        assert value, "a blank identifier gives the grade to the row before's user"
        grade = row[1].strip()
        feedback = row[2].strip() if len(row) > 2 else ""
        assert value not in out, "one user twice"
        out[value] = (None if grade in ("", "-") else float(grade), feedback)
    return out


def moodle_header(kind: str) -> str:
    return {"email": "Email address", "username": "Username", "idnumber": "ID number"}[kind]


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    table = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig")))
    return {r["learner"]: r for r in table}


def unmapped(path: Path) -> dict[str, dict[str, str]]:
    table = csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig")))
    return {r["learner"].removeprefix("'"): r for r in table}


# --- the class of 47 ----------------------------------------------------------------------


def test_the_class_is_47_graded_learners(grades):
    assert len(grades) == 47
    assert grades["cut short"]["status"] == "error" and grades["cut short"]["score"] == ""
    assert grades["learner41"]["score"] == "0"  # a real zero: the fresh lab


def test_canvas_carries_every_mapped_score(exported, grades, roster_file):
    to, _ = exported
    parsed = canvas_parse(to / "canvas-import.csv")
    assert parsed["bom"] and parsed["crlf"]
    assert parsed["titles"] == ["GPU sharing lab"] and parsed["points"] == {"4711": "100"}
    people = read_roster(roster_file)
    by_id = {}
    for s in parsed["students"]:
        key = s["id"] or s["sis_login_id"]
        assert key and key not in by_id
        by_id[key] = s
    expected_out = {UNSAFE_ID}  # its SIS Login ID cannot be written as Canvas reads it
    for learner, person in people.items():
        if learner in expected_out:
            assert person["ID"] not in by_id
            continue
        s = by_id.pop(person["ID"] or person["SIS Login ID"])
        assert s["name"] == person["Student"].replace("=1+2", "'=1+2")  # the guard, shown
        assert (s["section"], s["sis_user_id"]) == (person["Section"], person["SIS User ID"])
        graded = _row(grades, learner)
        want = graded["score"] if graded else ""  # no submission, or not graded: blank
        assert s["grades"] == {"4711": want}, learner
    # the two learners of the Canvas download: their Canvas IDs come from its file names
    for learner in CANVAS_DOWNLOAD:
        name, user = learner.rsplit("_", 1)
        s = by_id.pop(user)
        assert s["name"] == name and s["grades"] == {"4711": grades[learner]["score"]}
    assert by_id == {}
    assert by_id == {} and len(parsed["students"]) == 47 - len(UNMAPPED) + len(ABSENT) - 1


def test_canvas_lists_every_unmapped_learner(exported, grades):
    to, stdout = exported
    left = unmapped(to / "canvas-unmapped.csv")
    assert set(left) == {*UNMAPPED, UNSAFE_ID}
    for learner in UNMAPPED:
        assert left[learner]["reason"] == "no roster entry"
        assert left[learner]["score"] == grades[learner]["score"]
        assert f"    {learner} (score {grades[learner]['score']}): no roster entry" in stdout
    assert "cannot be written as Canvas reads it" in left[UNSAFE_ID]["reason"]
    assert "not graded (blank): cut short: " in stdout
    assert "no submission (blank): Absent, Amy, 缺席者, no-show" in stdout


def test_moodle_carries_every_mapped_score(exported, grades, roster_file):
    to, _ = exported
    parsed = moodle_parse(to / "moodle-import.csv", "email")
    people = read_roster(roster_file)
    for learner, person in people.items():
        if learner == NO_EMAIL:
            continue
        grade, feedback = parsed.pop(person["Email address"])
        graded = _row(grades, learner)
        if graded is None or graded["status"] == "error":
            assert grade is None and feedback == "", learner
            continue
        assert grade == float(graded["score"]), learner
        if graded["status"] == "passed":
            assert feedback == "100/100 points: every check passed.", feedback
        else:
            assert feedback.startswith(f"{graded['score']}/100 points. Points lost: "), feedback
            failed = [
                n
                for n in gradebook.columns([], gradebook.catalog())[1]
                if graded[n] != "" and graded[n] != str(_max(n))
            ]
            for number in failed[:8]:
                assert f"{number} {messages.title(number, 'en')} (-" in feedback
    assert parsed == {}
    left = unmapped(to / "moodle-unmapped.csv")
    assert set(left) == {*UNMAPPED, *CANVAS_DOWNLOAD, NO_EMAIL}
    assert left[NO_EMAIL]["reason"] == "no email in the roster"
    assert left[NO_EMAIL]["score"] == grades[NO_EMAIL]["score"]


def _max(number: str) -> int:
    return next(c.max_score for c in gradebook.catalog() if c.number == number)


def test_a_fresh_lab_lists_eight_lost_checks_and_counts_the_rest(exported, roster_file):
    to, _ = exported
    email = read_roster(roster_file)["learner41"]["Email address"]
    grade, feedback = moodle_parse(to / "moodle-import.csv", "email")[email]
    assert grade == 0
    assert feedback.count("(-") == 8 and feedback.endswith(
        f"; {len(gradebook.catalog()) - 8} more checks."
    )


def test_moodle_by_username_in_chinese_and_korean(class_dir, roster_file, tmp_path):
    for lang in ("zh", "ko"):
        rc, _, stderr = run_export(
            class_dir, "--moodle", "--roster", str(roster_file), "--assignment", "实验",
            "--moodle-id", "username", "--feedback", "--lang", lang, "--to", str(tmp_path / lang),
        )  # fmt: skip
        assert rc == 0, stderr
        parsed = moodle_parse(tmp_path / lang / "moodle-import.csv", "username")
        people = read_roster(roster_file)
        _grade, said = parsed[people["张伟"]["username"]]
        title = messages.title("1.4", lang)
        if lang == "zh":
            assert said.startswith("98/100 分。失分：1.4 ") and f"1.4 {title}（扣 2 分）" in said
        else:
            assert said.startswith("98/100점. 감점: 1.4 ") and f"1.4 {title}(-2점)" in said
        _grade, said = parsed[people["reference twin"]["username"]]
        assert said == messages.catalog(lang)["class"]["lms_all_passed"].format(score=100, max=100)


def test_points_possible_scales_every_grade(class_dir, roster_file, grades, tmp_path):
    rc, stdout, stderr = run_export(
        class_dir, "--canvas", "--roster", str(roster_file), "--assignment", "Lab",
        "--points", "12.5", "--missing", "zero", "--to", str(tmp_path),
    )  # fmt: skip
    assert rc == 0, stderr
    parsed = canvas_parse(tmp_path / "canvas-import.csv")
    assert parsed["titles"] == [] and parsed["points"] == {}  # no ID: matched by title
    assert "out of 12.5 points" in stdout and "no submission (0): Absent, Amy" in stdout
    text = (tmp_path / "canvas-import.csv").read_text(encoding="utf-8-sig")
    table = list(csv.reader(io.StringIO(text)))
    assert table[0][-1] == "Lab" and table[1] == ["Points Possible", "", "", "", "", "12.5"]
    people = read_roster(roster_file)
    got = {r[1] or r[3]: r[5] for r in table[2:]}
    for learner, person in people.items():
        if learner == UNSAFE_ID:
            continue
        cell = got[person["ID"] or person["SIS Login ID"]]
        if learner in ABSENT:
            assert cell == "0"  # --missing zero
        elif learner == "cut short":
            assert cell == ""  # not graded is never a 0: the grade is ours to give
        else:
            score = _row(grades, learner)
            assert score is not None
            assert Decimal(cell) == plan.scaled(int(score["score"]), 100, Decimal("12.5"))
    assert got[people["learner20"]["ID"]] == "11.38"  # 91 of 100 is 11.375: half up


# --- the roster ---------------------------------------------------------------------------


def _roster(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("file,name\na.tgz,Ann\n", "its header row has no learner column"),
        ("learner,canvas_id\nann,12a\n", "canvas_id '12a' is not a Canvas user ID"),
        ("learner,email\nann,a@x.org\nbob,A@X.org\n", "email 'A@X.org' is given to both ann"),
        ("file,learner,sis_user_id\na,ann,S1\nb,ann,S2\n", "ann has sis_user_id 'S1' on row 2"),
    ],
)
def test_a_roster_that_cannot_be_used_is_one_line(class_dir, tmp_path, text, said):
    rc, stdout, stderr = run_export(
        class_dir, "--canvas", "--roster", str(_roster(tmp_path, text)), "--assignment", "Lab"
    )
    assert rc == 2 and stdout == "" and said in stderr and len(stderr.splitlines()) == 1, stderr
    assert not (class_dir / "canvas-import.csv").exists()


def test_the_class_grade_roster_is_read_with_its_extra_columns(tmp_path):
    """file,learner with one row per file, Canvas's export headers, a row without a learner."""
    path = _roster(
        tmp_path,
        "File,Learner,Student,ID,SIS Login ID,Notes\n"
        'a-1.tgz,ann,"Lee, Ann",17,alee,x\n'
        "a-2.tgz,ann,,17,,\n"
        "    Points Possible,,,,,100\n",
    )
    read = roster.read(path)
    assert read.skipped == 1 and list(read.people) == ["ann"]
    ann = read.people["ann"]
    assert (ann.name, ann.canvas_id, ann.sis_login_id, ann.line) == ("Lee, Ann", "17", "alee", 2)


# --- what the export refuses --------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--canvas", "--assignment", "Lab Final Score"], "Canvas takes a column named so"),
        (["--canvas", "--assignment", "Lab (12)"], "give the ID with --assignment-id"),
        (["--canvas", "--assignment", "Lab", "--assignment-id", "x1"], "is digits"),
        (["--canvas", "--assignment", "=HYPERLINK()"], "like a spreadsheet formula"),
        (["--moodle", "--assignment", "Lab"], "--moodle needs --roster"),
        (["--assignment", "Lab"], "--canvas, --moodle or both"),
        (["--canvas", "--assignment", "Lab", "--feedback"], "add --moodle"),
        (["--canvas", "--assignment", "Lab", "--points", "0"], "--points '0'"),
        (["--canvas", "--assignment", "Lab", "--lang", "fr"], "fr"),
    ],
)
def test_options_that_cannot_be_used(class_dir, args, said):
    rc, _, stderr = run_export(class_dir, *args)
    assert rc == 2 and said in stderr and len(stderr.splitlines()) == 1, stderr


def test_a_class_folder_whose_csv_disagrees_is_refused(class_dir, tmp_path):
    """A results.json written after grades.csv (a grade still running) is not exported."""
    copy = tmp_path / "class"
    shutil.copytree(class_dir, copy)
    results = copy / "learner15" / "results.json"
    data = json.loads(results.read_text(encoding="utf-8"))
    data["score"] = 12
    results.write_text(json.dumps(data), encoding="utf-8")
    rc, _, stderr = run_export(copy, "--canvas", "--assignment", "Lab")
    assert rc == 2 and "does not list what the results.json files beside it hold" in stderr
    (copy / "learner15" / "results.json").write_text("{", encoding="utf-8")
    rc, _, stderr = run_export(copy, "--canvas", "--assignment", "Lab")
    assert rc == 2 and "cannot read" in stderr and "learner15" in stderr


def test_a_learner_folder_is_never_written_over(class_dir, roster_file, tmp_path):
    """Not even the other LMS's file is written when one of the names is a folder."""
    copy = tmp_path / "class"
    shutil.copytree(class_dir, copy)
    (copy / "moodle-unmapped.csv").mkdir()
    args = ("--canvas", "--moodle", "--roster", str(roster_file), "--assignment", "Lab")
    rc, _, stderr = run_export(copy, *args)
    assert rc == 2 and "moodle-unmapped.csv is a folder" in stderr and "--to" in stderr
    assert not (copy / "canvas-import.csv").exists()


def test_without_a_roster_canvas_takes_its_own_download(class_dir, tmp_path):
    rc, stdout, stderr = run_export(
        class_dir, "--canvas", "--assignment", "Lab", "--to", str(tmp_path)
    )
    assert rc == 0, stderr
    parsed = canvas_parse(tmp_path / "canvas-import.csv")
    assert sorted(s["id"] for s in parsed["students"]) == ["4242", "4343"]
    assert len(unmapped(tmp_path / "canvas-unmapped.csv")) == 45
    assert "45 not in canvas-import.csv (listed in canvas-unmapped.csv):" in stdout


# --- the plan, on the real rows -----------------------------------------------------------


def test_with_all_the_latest_snapshot_is_exported_and_apart_rows_are_no_ones(class_dir):
    """--all: a row per snapshot, the latest exported; a row apart is nobody's until decided."""
    rows = gradebook.load_rows(class_dir)
    ada = next(r for r in rows if r.learner == "learner15")
    then = {**ada.submission, "captured_at": "2020-01-01T00:00:00Z"}
    older = replace(ada, snapshot="a-old.gpushare.tgz", score=3, submission=then)
    apart = replace(ada, learner="bo/bo-1", folder="bo/bo-1")
    people = {k: roster.Person(k, canvas_id=str(i)) for i, k in enumerate(["learner15", "bo"])}
    made = plan.make([older, ada, apart], roster.Roster(people))
    first, bo = made.entries
    assert first.row is ada and first.points == Decimal(ada.score or 0) and first.rows == 2
    assert made.notes == [
        f"learner15: 2 graded snapshots (--all): the latest, {ada.snapshot}, is exported"
    ]
    assert bo.state == plan.APART and bo.points is None
    assert [(u.learner, u.reason) for u in made.unmapped] == [
        ("bo/bo-1", "graded apart: its manifest alone names the learner")
    ]


def test_a_check_learners_may_not_see_is_never_named(class_dir):
    """Under a policy, a hidden check's title is no feedback's: its points are one sum."""
    row = next(r for r in gradebook.load_rows(class_dir) if r.learner == "learner27")
    lost = [c for c in row.cells.values() if c.score is not None and c.score < c.max_score]
    hidden = lost[0]
    cells = {**row.cells, hidden.number: replace(hidden, visibility="hidden")}
    said = moodle.feedback(replace(row, cells=cells), "en")
    assert hidden.number not in said and messages.title(hidden.number, "en") not in said
    assert said.endswith(f"; checks not shown (-{hidden.max_score - hidden.score}).")
    for cell in lost[1:]:
        assert f"{cell.number} {messages.title(cell.number, 'en')} (-" in said
    assert moodle.feedback(row, "en").count("(-") == len(lost)


def test_the_import_file_is_its_owners_alone(exported):
    to, _ = exported
    assert (to / "canvas-import.csv").stat().st_mode & 0o077 == 0
    assert (to / "moodle-import.csv").stat().st_mode & 0o077 == 0


def test_help_is_plain_text():
    proc = _gpushare("class", "export", "--help")
    assert proc.returncode == 0 and "\x1b" not in proc.stdout
    for option in (
        "--canvas",
        "--moodle",
        "--roster",
        "--assignment-id",
        "--moodle-id",
        "--missing",
    ):
        assert option in proc.stdout


def test_export_files_are_names_no_learner_folder_takes() -> None:
    """The export writes beside grades.csv by default: a learner whose id is the name of one of
    its files must get a folder of another name, as for grades.csv itself."""
    from gpushare.classroom import identity
    from gpushare.lms import canvas

    written = {canvas.FILE, canvas.UNMAPPED, moodle.FILE, moodle.UNMAPPED}
    assert written <= identity.RESERVED
    for name in written:
        assert identity.folder_name(name.upper()).casefold() != name
