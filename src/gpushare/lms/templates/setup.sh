#!/usr/bin/env bash
# gpushare's Gradescope autograder: setup.sh, run once when the autograder image is built.
#
# It installs only what grading a snapshot offline needs, into $AUTOGRADER_ROOT (default
# /autograder, Gradescope's layout): a Python >= 3.11 virtual environment at venv/ with the
# pinned requirements.txt of this bundle, and bubblewrap (the sandbox for learners' scripts)
# where apt exists. No kwok, no Go, no cluster: a snapshot holds the cluster's answers.
#
# Knobs, for running the same layout elsewhere (tests, a runner of one's own):
#   AUTOGRADER_ROOT     the root (source/ is this bundle unpacked; venv/ is made there)
#   GPUSHARE_PYTHON     the interpreter to build the venv from (default: the newest python3.x
#                       that is 3.11 or later; Debian 12's own 3.11.2 will do: tarfile's data
#                       filter, new in 3.11.4, is a second opinion used where present, on top
#                       of gpushare's own checks of every archive member)
#   GPUSHARE_PIP_ARGS   extra pip arguments, e.g. "--no-index --find-links /wheels" offline
#   GPUSHARE_SETUP_APT  0: never call apt-get (default 1: only for what is missing)
set -euo pipefail

ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="$ROOT/venv"

say() { printf 'gpushare setup: %s\n' "$*"; }
die() { printf 'gpushare setup: error: %s\n' "$*" >&2; exit 1; }

apt_ok() { [ "${GPUSHARE_SETUP_APT:-1}" != 0 ] && command -v apt-get >/dev/null 2>&1; }
APT_UPDATED=""
apt_install() {
    if [ -z "$APT_UPDATED" ]; then
        apt-get update -qq
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

find_python() {
    local py
    for py in ${GPUSHARE_PYTHON:-} python3.13 python3.12 python3.11 python3; do
        if command -v "$py" >/dev/null 2>&1 \
            && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$py"
            return 0
        fi
    done
    return 1
}

[ -f "$SOURCE/requirements.txt" ] || die "no $SOURCE/requirements.txt: unpack the bundle into $SOURCE"

# 1. Python >= 3.11: the base's own where it has one (Ubuntu 24.04: 3.12; Debian 12: 3.11.2).
#    Else from the release's own archive, one version after the other (Ubuntu 22.04, Gradescope's
#    default, has python3.11 in universe); never a PPA: add-apt-repository alone pulls some 80
#    packages, and a PPA's key and network are one more way to fail while the image builds.
if ! PY="$(find_python)"; then
    apt_ok || die "no Python >= 3.11 here, and no apt-get to install one (set GPUSHARE_PYTHON)"
    for version in 3.13 3.12 3.11; do
        say "installing python$version with apt-get (if this release has it)"
        if apt_install "python$version" "python$version-venv" >/dev/null 2>&1; then
            break
        fi
    done
    PY="$(find_python)" || die "no Python >= 3.11 in this release's archive: pick a newer base image (Ubuntu 24.04, Debian 12) or set GPUSHARE_PYTHON"
fi
say "python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"

# 2. the venv and the pinned requirements
if ! "$PY" -m venv --clear "$VENV" 2>/dev/null; then
    apt_ok || die "$PY cannot create a venv (its venv module is missing)"
    apt_install "$(basename "$PY")-venv"
    "$PY" -m venv --clear "$VENV"
fi
# shellcheck disable=SC2086  # GPUSHARE_PIP_ARGS is a list of words
"$VENV/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
    --prefer-binary ${GPUSHARE_PIP_ARGS:-} -r "$SOURCE/requirements.txt"

# 3. bubblewrap, the sandbox for the learner's script, where apt can install it
if command -v bwrap >/dev/null 2>&1; then
    say "bubblewrap: $(command -v bwrap)"
elif apt_ok; then
    say "installing bubblewrap with apt-get"
    apt_install bubblewrap || say "note: bubblewrap could not be installed"
else
    say "note: no bubblewrap and no apt-get: learners' scripts will run without the sandbox"
fi

# 4. bytecode once here, not at every grade; then a check that the grader imports
"$VENV/bin/python" -m compileall -q "$SOURCE/src" "$SOURCE/graders" >/dev/null
PYTHONPATH="$SOURCE/src" "$VENV/bin/python" -c 'import yaml, gpushare.lms.gradescope'
say "ready: $(PYTHONPATH="$SOURCE/src" "$VENV/bin/python" -c 'import gpushare; print("gpushare", gpushare.__version__)')"
