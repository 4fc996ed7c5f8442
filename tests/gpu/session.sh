#!/usr/bin/env bash
# Run the GPU evidence on a GPU machine from the source tree, one part per call, each within a
# time limit, keeping whatever finished when the limit cuts it:
#
#   bash tests/gpu/session.sh suite      # the Python suite with CUDA visible (-m "not gpu")
#   bash tests/gpu/session.sh checks     # every -m gpu check except the notebooks, one by one
#                                        # (CHECKS=nvml_server,torchrun picks some)
#   bash tests/gpu/session.sh notebooks  # run_notebooks_gpu.py (NOTEBOOKS=00,01 TIER=16gb)
#
# On one H200 (GPU run 20), notebooks 00-04 took 337 s together, 06 over 201 s, 07 over 173 s:
# give 06 and 07 a call each (NOTEBOOKS=06, NOTEBOOKS=07). On one H100 (2026-12-08) 00-02 took
# 433 s (43, 151 and 239 s) and 03 53 s, and 04 did not finish in the 250 s left (201-317 s
# before): there, NOTEBOOKS=00,01,02 in one call and 03,04 in the next.
#
# LIMIT_S (default 540) bounds the whole part; results go to $OUT (else ./gpu-run) as one
# archive, gpu-<part>.tgz, plus the part's log (gpu-<TAG>.tgz and <TAG>.log with TAG set, so that
# parts can run side by side in one call). pytest writes its JUnit XML and its summary only at
# the end: the limit stops it with SIGINT, which pytest takes as Ctrl-C and still writes both, so
# a part cut by its limit names every failure so far (GPU runs 18 and 22 of 2026-12-02 lost theirs
# to a SIGTERM), and each failure is also appended to failures.txt as it happens.
#
# On an offline machine, bring the Jupyter stack as wheels first (.whl/ with its install.py) and
# this script installs them into /tmp/site.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
part=${1:?usage: session.sh suite|checks|notebooks, or start PART, or collect}

# Notebook 07 in one call, cut between cells where the call's time runs out (no cell starts after
# DEADLINE_S; the executed copy keeps every cell that ran; 2026-12-04: cells 0-64 in 426 s):
#
#   NOTEBOOKS=07 DEADLINE_S=390 LIMIT_S=585 bash tests/gpu/session.sh notebooks
#
# A part longer than one call (notebook 07 at full size with its %tune: about 650 s). Fragile: the
# machine goes back 30 s after a call, and a late collect loses the run (twice so far):
#
#   bash tests/gpu/session.sh start notebooks   # NOTEBOOKS=07; returns after WAIT_S (560)
#   bash tests/gpu/session.sh collect           # the NEXT call, made at once: the machine goes
#                                               # back 30 s after a call, and the run with it
#
# start runs the part in a process group of its own, outliving the call, with LIMIT_S (default
# 1100) and its results under /tmp/gpu-background; collect waits for it (WAIT_S) and copies its
# archive and log to $OUT. (Round 4 lost a full run of 07 to a collect made a minute late.)
background=/tmp/gpu-background
wait_for_background() {  # until the part has written its exit status, or WAIT_S seconds
  local waited=0
  while [ ! -f "$background/done" ] && [ "$waited" -lt "${WAIT_S:-560}" ]; do
    sleep 5; waited=$((waited + 5))
  done
  [ -f "$background/done" ] && echo "background part done after $waited s more: exit $(cat "$background/done")"
}
case $part in
  start)
    inner=${2:?usage: session.sh start suite|checks|notebooks}
    rm -rf "$background" && mkdir -p "$background"
    ( export OUT=$background LIMIT_S=${LIMIT_S:-1100}
      setsid nohup bash -c 'bash tests/gpu/session.sh "$1"; echo $? > "$OUT/done"' _ "$inner" \
        > "$background/session.out" 2>&1 & )
    echo "started $inner in the background ($background); collect it in the next call, at once"
    wait_for_background || echo "still running: bash tests/gpu/session.sh collect, now"
    exit 0
    ;;
  collect)
    wait_for_background || { echo "not done after ${WAIT_S:-560} s"; tail -5 "$background/session.out"; }
    mkdir -p "${OUT:-$PWD/gpu-run}"
    cp "$background"/gpu-*.tgz "$background"/*.log "${OUT:-$PWD/gpu-run}/" 2>/dev/null
    tail -30 "$background/session.out" 2>/dev/null
    exit 0
    ;;
esac
limit=${LIMIT_S:-540}
out=${OUT:-$PWD/gpu-run}
work=$(mktemp -d)
start=$SECONDS
left() { echo $((limit - (SECONDS - start))); }

if [ -f .whl/install.py ]; then
  python3 .whl/install.py >"$work/install.log" 2>&1 || { tail -20 "$work/install.log"; exit 1; }
  # install.py installs with --no-compile; pip install compiles bytecode, and with it any
  # SyntaxWarning of a package's source (torchao 0.x's quant_api.py), where no one sees it. Do the
  # same here, or the first notebook to import the package shows the warning in its executed copy.
  python3 -m compileall -q -j 0 /tmp/site >>"$work/install.log" 2>&1
  export PYTHONPATH=/tmp/site:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1 JUPYTER_GPU_OUT=$work/figures
export JUPYTER_GPU_FAILURES=$work/failures.txt
mkdir -p "$out" "$work/figures"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch; print(torch.__version__, sys.version.split()[0])'
  nproc; } >"$work/machine.txt" 2>&1

# pytest within what is left of the limit, less a margin for the archive (the limit must never cut
# the packing); SIGINT so that pytest still writes its summary and JUnit XML.
pytest_in_time() {
  timeout -s INT -k 20 $(($(left) - 35)) python3 -m pytest -p tests.gpu.failure_log \
    -p no:cacheprovider -rfE "$@"
}

case $part in
  suite)
    pytest_in_time -m "not gpu" -n "${WORKERS:-12}" --timeout 240 -q \
      --junitxml="$work/suite.xml" tests >"$work/suite.log" 2>&1
    echo "exit $?" >>"$work/suite.log"
    ;;
  checks)
    for check in tests/gpu/test_*_gpu.py; do
      [ "$check" = tests/gpu/test_notebooks_gpu.py ] && continue
      name=$(basename "$check" .py)
      if [ -n "${CHECKS:-}" ]; then
        short=${name#test_}
        case ",$CHECKS," in *",${short%_gpu},"*) ;; *) continue ;; esac
      fi
      [ "$(left)" -gt 45 ] || { echo "not run (time): $check" >>"$work/checks.log"; continue; }
      pytest_in_time -m gpu -v --timeout 300 --junitxml="$work/$name.xml" "$check" \
        >"$work/$name.log" 2>&1
      echo "$check: exit $?" >>"$work/checks.log"
    done
    ;;
  notebooks)
    timeout $(($(left) - 15)) python3 tests/gpu/run_notebooks_gpu.py \
      --only "${NOTEBOOKS:-00,01,02,03,04}" ${TIER:+--tier "$TIER"} ${DEADLINE_S:+--deadline "$DEADLINE_S"} --out "$work/notebooks" \
      --summary "$work/notebooks/summary.json" >"$work/notebooks.log" 2>&1
    echo "exit $?" >>"$work/notebooks.log"
    ;;
  *) echo "unknown part: $part" >&2; exit 2 ;;
esac

tag=${TAG:-$part}
tar czf "$out/gpu-$tag.tgz" -C "$work" .
# A file over 16 MiB does not come back from the device (06's executed notebooks with their
# compile caches did not, 2026-12-05): then the figures and logs come back in a second archive
# without the executed notebooks.
if [ "$(stat -c %s "$out/gpu-$tag.tgz")" -gt 15000000 ]; then
  tar czf "$out/gpu-$tag-figures.tgz" --exclude='*.tar.gz' --exclude='*.ipynb' -C "$work" .
  echo "gpu-$tag.tgz is over 15 MB: its figures and logs are also in gpu-$tag-figures.tgz"
fi
cp "$work/$part.log" "$out/$tag.log" 2>/dev/null
# What a reader wants first: failures, then the tail of each log.
grep -h -E "FAILED|ERROR|exit [0-9]+|not run" "$work"/*.log | head -40
for log in "$work"/*.log; do echo "== $(basename "$log")"; tail -8 "$log"; done
echo "part $part took $((SECONDS - start)) s; archive $out/gpu-$tag.tgz"
