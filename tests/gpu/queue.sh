#!/usr/bin/env bash
# Run a queue of GPU jobs one after the other, in the background, across as many device calls as
# they need: the device's calls are 10 minutes at most and a session's device time is about 30,
# so one queue that runs without a gap between jobs, collected by call after call, spends that
# time on the jobs rather than on starting machines and installing wheels. The jobs never run
# side by side (a timing taken beside another job would not be the figure it claims to be).
#
#   bash tests/gpu/queue.sh start 'nb05=NOTEBOOKS=05 bash tests/gpu/session.sh notebooks' \
#       'magic=python3 benchmarks/magic_overhead.py --json $OUT/magic_overhead.json' ...
#   bash tests/gpu/queue.sh collect      # the NEXT call, made at once (the machine goes back
#                                        # 30 s after a call, and the queue with it)
#
# Each job NAME=COMMAND runs with OUT set to a folder of its own and its output in job.log there.
# start returns after WAIT_S (default 540) as collect does; collect waits until the queue ends or
# WAIT_S passes, then copies every job finished since the last collect to $OUT as NAME.tgz (a
# file over 16 MiB does not come back from the device: an executed notebook's archive over 15 MB
# is left out, its figures are kept) and prints where the queue is.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
queue=/tmp/gpu-queue
action=${1:?usage: queue.sh start NAME=COMMAND... | collect}
shift

collect() {
  local waited=0
  while [ ! -f "$queue/ended" ] && [ "$waited" -lt "${WAIT_S:-540}" ]; do
    sleep 5; waited=$((waited + 5))
  done
  mkdir -p "${OUT:-$PWD/gpu-run}"
  for done_file in "$queue"/*/done; do
    [ -f "$done_file" ] || continue
    local job; job=$(dirname "$done_file")
    local name; name=$(basename "$job")
    [ -f "$job/collected" ] && continue
    # A session.sh archive over 15 MB would not come back: its figures archive beside it does.
    find "$job" -name 'gpu-*.tgz' -size +15M -delete
    tar czf "${OUT:-$PWD/gpu-run}/$name.tgz" -C "$job" .
    touch "$job/collected"
    echo "collected $name: exit $(cat "$done_file")"
  done
  echo "== queue after $waited s of waiting:"
  cat "$queue/progress.txt"
  [ -f "$queue/ended" ] && echo "queue ended" || echo "still running: queue.sh collect, now"
}

case $action in
  start)
    [ "$#" -gt 0 ] || { echo "start needs NAME=COMMAND jobs" >&2; exit 2; }
    rm -rf "$queue" && mkdir -p "$queue"
    if [ -f .whl/install.py ]; then  # once for every job (session.sh does it again, quickly)
      python3 .whl/install.py >"$queue/install.log" 2>&1 || { tail -20 "$queue/install.log"; exit 1; }
    fi
    printf '%s\n' "$@" >"$queue/jobs.txt"
    (setsid nohup bash -c '
      queue=$1
      export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH:-} PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
      while IFS= read -r spec; do
        name=${spec%%=*}; command=${spec#*=}
        mkdir -p "$queue/$name"
        echo "$(date -u +%T) $name started" >>"$queue/progress.txt"
        begun=$SECONDS
        OUT=$queue/$name bash -c "$command" >"$queue/$name/job.log" 2>&1
        status=$?
        echo "$status" >"$queue/$name/done"
        echo "$(date -u +%T) $name exit $status after $((SECONDS - begun)) s" >>"$queue/progress.txt"
      done <"$queue/jobs.txt"
      touch "$queue/ended"' _ "$queue" >"$queue/queue.out" 2>&1 &)
    echo "started $# jobs in $queue; collect in the next call, at once"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    collect
    ;;
  collect) collect ;;
  *) echo "unknown action: $action" >&2; exit 2 ;;
esac
