# gpushare: `make setup` once (builds the control plane, many minutes cold), then `make test`.
# Learners: `make grade` (WORKDIR=/root/gpushare by default; STEP=1 for one step), or
# learner/Makefile copied into the work dir.

# the distribution's python3.11 when there is one that can make a venv, as in the lab and grading
# images (Debian's grades about 10% faster than a version manager's default build:
# docs/performance.md, "The interpreter"); else python3.11 on PATH. `make PYTHON=...` for another; an existing .venv keeps
# its interpreter until `make clean` (looked for only when a venv is made)
PYTHON  ?= $(shell /usr/bin/python3.11 -c 'import ensurepip, venv' 2>/dev/null \
	&& echo /usr/bin/python3.11 || echo python3.11)
VENV    := .venv
BIN     := $(VENV)/bin
WORKDIR ?= /root/gpushare
STAMP   := $(VENV)/.installed

.PHONY: setup install test test-fast record demo lint grade watch submit lab up down reset status bench stress clean images

setup: install sandbox
	$(BIN)/gpushare setup

# learners' scripts run in bubblewrap (src/gpushare/sandbox/isolation.py): installed where we can (root
# with apt-get), else we say how; a missing sandbox never fails setup
.PHONY: sandbox
sandbox: install
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing bubblewrap (apt-get)"; \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			-o DPkg::Lock::Timeout=120 bubblewrap >/dev/null; } \
			|| echo "warning: could not install bubblewrap"; \
	else \
		echo "bubblewrap is not installed: install it (Debian/Ubuntu: sudo apt-get install" \
			"bubblewrap; Fedora: sudo dnf install bubblewrap) to sandbox learners' scripts"; \
	fi
	@$(BIN)/python -c "from gpushare.sandbox import isolation as i; p = i.probe(); \
		print('sandbox: ' + ('bubblewrap ready' if p.available else \
		f'{p.reason}; {i.INSTALL_HINT}'))"

install: $(STAMP)

# the pinned dependencies of grading first (requirements/grade.lock, hashed: the grading image and
# the Gradescope bundle install the same), then the package with the tests' tools and the live
# path's official kubernetes client (the `live` extra)
$(STAMP): pyproject.toml requirements/grade.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements/grade.lock
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,live]'
	@touch $@

# requirements/grade.lock again from pyproject.toml's dependencies (not its extras), every
# version pinned with the hashes of all its files on PyPI; pip-tools in a venv of its own
LOCK_VENV := build/lock-venv
.PHONY: lock
lock:
	@test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && \
		$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check pip-tools; }
	$(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
		--no-emit-index-url --no-emit-find-links --output-file requirements/grade.lock pyproject.toml

# the tests run as in an activated venv: a learner's script that asks for `python3` outside the
# sandbox (the `none` level, the tests' replays) gets this venv's, with PyYAML from the lock, not
# whatever PATH holds (a version manager's shim costs 0.1 s a call)
TESTENV := PATH="$(CURDIR)/$(BIN):$$PATH"

test: setup test-tools
	$(TESTENV) $(BIN)/python -m pytest tests

# what only the tests use: tmux, the real terminal that `gpushare watch` is tested in
# (tests/test_watch.py); installed where we can (root with apt-get), else that test says why
.PHONY: test-tools
test-tools:
	@command -v tmux >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
		&& echo "installing tmux (apt-get)" && apt-get update -qq \
		&& DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=120 \
			tmux >/dev/null; } || echo "tmux is not installed: the watch test in a terminal is skipped"

# the fast tier: no cluster, no control plane (graders on recorded lab states, every mutant and
# alternative, and every test that needs no lab), on both cores; under a minute. The sandbox's
# hostility suites (fork bombs, hung supervisors) and the Gradescope bundle's install by its
# setup.sh run in `make test` only.
test-fast: install
	$(TESTENV) GPUSHARE_TEST_TIER=fast $(BIN)/python -m pytest tests -m "not lab and not install" \
		-q -n 2 \
		--ignore=tests/test_sandbox.py --ignore=tests/test_isolation.py

# re-record the fast tier's lab states and the demo's examples from a real lab, then the
# 47-learner class fixture of the LMS exports (tests/data/class-47.tgz) from those states
record: setup
	$(BIN)/python -m tests.record_states
	$(BIN)/python -m tests.record_class

# the product in a minute, on a fresh machine (no control-plane build): two bundled
# submissions graded as their learners would see them (our own examples: no sandbox needed)
DEMO_LANG ?= en
demo: install
	$(BIN)/gpushare grade --snapshot examples/mistakes.gpushare.tgz --lang $(DEMO_LANG) \
		--seed 7 --unsafe-no-sandbox || [ $$? -eq 1 ]  # 1: checks failed, as they should
	$(BIN)/gpushare grade --snapshot examples/reference.gpushare.tgz --lang $(DEMO_LANG) \
		--seed 7 --unsafe-no-sandbox

lint: install
	$(BIN)/ruff check src tests graders benchmarks deploy tools conftest.py examples/labs
	$(BIN)/ruff format --check src tests graders benchmarks deploy tools conftest.py examples/labs
	$(BIN)/mypy
	@! grep -rnE 'type: ignore(\[[a-z-]+(, *[a-z-]+)*\])? *$$' src graders \
		|| { echo 'lint: a `type: ignore` says why, in a comment after it'; exit 1; }

# the lab as it is, never started nor created (a misspelt GPUSHARE_CLUSTER names a lab that does
# not exist: the grade says so, with the labs that do; a stopped lab: `make up`); STEP=1: only
# that step. Only the grade is printed, and a grade that is not perfect is no error of make's
# (`gpushare grade` itself still exits 1 for scripts; 2, no grade at all, fails make).
# learner/Makefile, copied into the work dir, gives the same `make grade` there.
grade: install
	@$(BIN)/gpushare grade --workdir $(WORKDIR) $(if $(STEP),--step $(STEP)) $(GRADE_ARGS) \
		|| [ $$? -eq 1 ]

# the steps graded live as the learner works (Ctrl-C to quit); like grade, it never starts,
# creates or writes to the lab
watch: install
	@$(BIN)/gpushare watch --workdir $(WORKDIR)

# the lab's handout (graders/handout/<lang>.md), paged, in the learner's language (LAB_ARGS="--lang en")
lab: install
	@$(BIN)/gpushare lab $(LAB_ARGS)

# hand in: one hashed file of the lab's objects and the work dir, written into the work dir
# (LEARNER=id, else $GPUSHARE_LEARNER, else asked once; OUT=file|dir), and what to do with it
submit: install
	@$(BIN)/gpushare submit --workdir $(WORKDIR) $(if $(LEARNER),--learner $(LEARNER)) \
		$(if $(OUT),--out $(OUT)) $(SUBMIT_ARGS)

up: setup
	$(BIN)/gpushare up

down: install
	$(BIN)/gpushare down

reset: install
	$(BIN)/gpushare reset

status: install
	$(BIN)/gpushare status

# the reference solution, where there is one: the learners' lab image holds no solutions/ (and
# so has no solve target)
ifneq ($(wildcard solutions/solve.sh),)
.PHONY: solve
solve: setup
	$(BIN)/gpushare solve --workdir $(WORKDIR)
endif

# timings on a lab of its own (gpushare-bench); each figure, with its goal, machine and date, goes
# into benchmarks/figures.json and the table of docs/performance.md
bench: setup
	$(BIN)/python benchmarks/bench_lab.py
	$(BIN)/python benchmarks/bench_grade.py
	$(BIN)/python benchmarks/bench_class.py
	$(TESTENV) $(BIN)/python benchmarks/bench_watch.py
	$(BIN)/python benchmarks/figures.py

# reset-then-solve cycles, each checked 10 s later (issue 8); 200 for the proof, 20 in CI
STRESS_CYCLES ?= 20
stress: setup
	$(BIN)/python benchmarks/stress_reset.py --cycles $(STRESS_CYCLES) $(STRESS_ARGS)

# every check's failure feedback in zh, ko and en, in one file for a native-level reader
# (issue 13); from the recorded cases of tests/feedback_cases.py, no cluster needed.
# feedback-record plays the cases again on a lab of its own (reset first) to refresh them
# (FEEDBACK_ARGS=--only-new: only the cases not recorded yet).
FEEDBACK_CLUSTER ?= gpushare-feedback
.PHONY: feedback-book feedback-record
feedback-book: install
	PYTHONPATH=graders $(BIN)/python -m tests.feedback_cases book --out build/feedback-book.md

feedback-record: setup
	PYTHONPATH=graders $(BIN)/python -m tests.feedback_cases record --cluster $(FEEDBACK_CLUSTER) \
		$(FEEDBACK_ARGS)

# both container images built and checked with podman, as root (deploy/images.py: the base from
# Debian packages with mmdebstrap, the grading image run as the class Job's pods, the sandbox's
# pod settings one by one, the lab image's smoke test); slow on 2 cores, so not in CI.
# IMAGES_ARGS="--steps class,sandbox" re-runs some steps on the images already built.
images: install
	$(BIN)/python deploy/images.py $(IMAGES_ARGS)

# the documentation site (mkdocs.yml, docs/) into build/site/, --strict: a broken link or anchor
# fails. Its tools are pinned with their hashes in requirements/docs.lock, in a venv of their own.
# The pages it builds are the committed ones: docs/cli.md is rewritten by `make cli-docs` only,
# so a stale one fails tests/test_docs.py instead of being mended in CI.
DOCS_VENV := build/docs-venv
.PHONY: docs docs-lock cli-docs docs-pictures
docs: install $(DOCS_VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --quiet
	@$(BIN)/python tools/site_check.py

$(DOCS_VENV)/.installed: requirements/docs.lock
	@test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes \
		-r requirements/docs.lock
	@touch $@

# docs/cli.md again from the parser (tests/test_docs.py fails when it is not what this writes)
cli-docs: install
	@$(BIN)/python tools/cli_reference.py

# docs/terminal.svg: a learner's terminal with failed checks, drawn from a real grade of
# examples/mistakes.gpushare.tgz (tools/terminal_svg.py); docs/watch.svg: `make watch` on a lab
# of its own, drawn from its screen in tmux (tools/watch_svg.py); docs/report.png: the sample
# class's report.html as headless Chromium draws it (tools/report_png.py)
docs-pictures: setup test-tools
	@$(BIN)/python tools/terminal_svg.py
	@$(TESTENV) $(BIN)/python tools/watch_svg.py
	@$(TESTENV) $(BIN)/python tools/report_png.py

# requirements/docs.lock again from requirements/docs.in, hashed (pip-tools, as `make lock`)
docs-lock:
	@test -x $(LOCK_VENV)/bin/pip-compile || { $(PYTHON) -m venv $(LOCK_VENV) && \
		$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check pip-tools; }
	$(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
		--no-emit-index-url --no-emit-find-links --output-file requirements/docs.lock \
		requirements/docs.in

clean:
	rm -rf $(VENV) build src/*.egg-info

# the Gradescope autograder on stock Debian 12 bases (its own python3 3.11.2; none at all), in
# podman as Gradescope runs it: setup.sh as root, then every grade with --network none (issue
# 19). Root, podman, runc, mmdebstrap; some minutes: not part of `make test` nor CI.
.PHONY: gradescope-check
gradescope-check: install
	bash deploy/gradescope-check.sh
