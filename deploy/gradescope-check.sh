#!/usr/bin/env bash
# The Gradescope autograder on a stock base, run as Gradescope runs it (`make gradescope-check`).
#
# 1. bases made with mmdebstrap (no container registry here): Debian 12 minimal with its own
#    python3 (3.11.2: no tarfile data filter) and, to prove the install path, the same
#    without any python3 (setup.sh must then install one from the release's archive);
# 2. the bundle (`gpushare gradescope bundle`), unpacked into /autograder/source;
# 3. `bash /autograder/source/setup.sh` as root, with the network (pip from PyPI, apt), and
#    run_autograder copied to /autograder/: the container committed as the autograder image;
# 4. each upload graded with `podman run --network none`: the reference (100), the mistakes
#    (86), a PDF that is no snapshot (0 and what to upload), nothing (0), each results.json
#    held to Gradescope's specification as tests/test_gradescope.py encodes it.
#
# Needs root, podman, runc and mmdebstrap (apt-get install podman runc mmdebstrap); podman
# here needs explicit rlimits and runc, given by a containers.conf of our own (CONTAINERS_CONF).
# Prints the figures: base and setup times, image sizes, each run's time and score.
#   GPUSHARE_CHECK_DIR   work folder (default build/gradescope-check; the bases are kept)
#   GPUSHARE_CHECK_BASES which bases: "python nopython" (default) or one of them
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${GPUSHARE_CHECK_DIR:-$ROOT/build/gradescope-check}"
BASES="${GPUSHARE_CHECK_BASES:-python nopython}"
PY="$ROOT/.venv/bin/python"
MIRROR="http://deb.debian.org/debian"
mkdir -p "$WORK"
cat >"$WORK/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$WORK/containers.conf"

say() { printf 'gradescope-check: %s\n' "$*"; }
die() { printf 'gradescope-check: FAILED: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
size() { podman image inspect --format '{{.Size}}' "$1" | awk '{ printf "%.0f MB", $1 / 1e6 }'; }

for tool in podman runc mmdebstrap; do
    command -v "$tool" >/dev/null || die "$tool is missing: apt-get install podman runc mmdebstrap"
done
[ -x "$PY" ] || die "no $PY: make install first"
HOST_CA="${GPUSHARE_CHECK_CA:-/etc/ssl/certs/ca-certificates.crt}"
[ -f "$HOST_CA" ] || die "no CA bundle at $HOST_CA (set GPUSHARE_CHECK_CA)"

# --------------------------------------------------------------------------- the bundle
"$PY" -m gpushare gradescope bundle --out "$WORK/autograder.zip" --lang en >/dev/null
rm -rf "$WORK/source" && mkdir -p "$WORK/source"
"$PY" - "$WORK/autograder.zip" "$WORK/source" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as zf:  # as Gradescope unpacks it: modes kept
    for info in zf.infolist():
        zf.extract(info, sys.argv[2])
        os.chmod(os.path.join(sys.argv[2], info.filename), (info.external_attr >> 16) & 0o777)
EOF

# --------------------------------------------------------------------------- the uploads
UP="$WORK/uploads"
rm -rf "$UP" && mkdir -p "$UP/reference" "$UP/mistakes" "$UP/pdf" "$UP/nothing"
cp "$ROOT/examples/reference.gpushare.tgz" "$UP/reference/"
cp "$ROOT/examples/mistakes.gpushare.tgz" "$UP/mistakes/"
printf '%%PDF-1.4\n%% my homework\n' >"$UP/pdf/homework.pdf"
head -c 4096 /dev/urandom >>"$UP/pdf/homework.pdf"

check_results() {  # results.json against Gradescope's specification; prints the score
    "$PY" - "$1" "$2" <<'EOF'
import json, sys
sys.path[:0] = [".", "graders"]  # tests/ import the lab's support package, as pytest does
import jsonschema
from tests.test_gradescope import SPEC, check_spec
data = json.load(open(sys.argv[1]))
jsonschema.validate(data, SPEC)
if sys.argv[2] == "graded":
    check_spec(data)
print(data["score"])
EOF
}

grade_all() {  # $1: the autograder image
    local image="$1" case t0 out score want
    for case in reference:100 mistakes:86 pdf:0 nothing:0; do
        want="${case#*:}"
        case="${case%%:*}"
        out="$WORK/results-$case"
        rm -rf "$out" && mkdir -p "$out"
        t0="$(now)"
        # Gradescope: the upload in /autograder/submission, results.json read from
        # /autograder/results; no network while grading
        podman run --rm --network none \
            -v "$UP/$case:/autograder/submission:ro" -v "$out:/autograder/results" \
            "$image" /autograder/run_autograder >"$out/stdout.txt" 2>&1 || true
        local took
        took="$(since "$t0")"
        [ -f "$out/results.json" ] || die "$case: no results.json ($(tail -3 "$out/stdout.txt"))"
        score="$(cd "$ROOT" && check_results "$out/results.json" \
            "$([ "$want" = 0 ] && echo upload || echo graded)")"
        [ "$score" = "$want" ] || die "$case: score $score, expected $want"
        say "  $case: score $score in ${took} s (network none)$(grep -o 'grading without the sandbox' "$out/stdout.txt" | head -1 | sed 's/^/; /')"
    done
    grep -q "make submit" "$WORK/results-pdf/results.json" || die "pdf: no advice to upload"
}

for base in $BASES; do
    case "$base" in
        python) include="python3,ca-certificates" ;;
        nopython) include="ca-certificates" ;;
        *) die "unknown base $base (python, nopython)" ;;
    esac
    tag="localhost/gpushare-gradescope-base:bookworm-$base"
    if ! podman image exists "$tag"; then
        t0="$(now)"
        mmdebstrap --quiet --variant=minbase --include="$include" bookworm \
            "$WORK/base-$base.tar" "$MIRROR"
        podman import -q "$WORK/base-$base.tar" "$tag" >/dev/null
        rm -f "$WORK/base-$base.tar"
        say "base $base: Debian 12 minbase + $include, made in $(since "$t0") s, $(size "$tag")"
    else
        say "base $base: $tag (kept from an earlier run), $(size "$tag")"
    fi
    name="gpushare-gradescope-setup-$base"
    podman rm -f "$name" >/dev/null 2>&1 || true
    t0="$(now)"
    # Gradescope: the zip unpacked into /autograder/source, setup.sh run once as root, then
    # run_autograder copied to /autograder/
    # the host's CA bundle for pip (PIP_CERT): where PyPI is reached through a TLS proxy, as on
    # the machines this was written on, the base's own CAs do not know it
    if ! podman run --name "$name" --user 0 -v "$WORK/source:/bundle:ro" \
        -v "$HOST_CA:/etc/gpushare-host-ca.crt:ro" -e PIP_CERT=/etc/gpushare-host-ca.crt \
        "$tag" bash -c '
            set -e
            mkdir -p /autograder && cp -a /bundle /autograder/source
            cd /autograder/source && bash ./setup.sh
            cp /autograder/source/run_autograder /autograder/run_autograder' \
        >"$WORK/setup-$base.txt" 2>&1; then
        tail -20 "$WORK/setup-$base.txt" >&2
        die "setup.sh on $base"
    fi
    took="$(since "$t0")"
    image="localhost/gpushare-gradescope:$base"
    podman commit -q "$name" "$image" >/dev/null
    podman rm "$name" >/dev/null
    say "setup.sh on $base: ${took} s, $(grep -o 'python: .*' "$WORK/setup-$base.txt"), image $(size "$image")"
    grep -q "add-apt-repository\|deadsnakes" "$WORK/setup-$base.txt" && die "setup.sh used a PPA"
    grade_all "$image"
done
say "ok"
