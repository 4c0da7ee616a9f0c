#!/usr/bin/env bash
# Runs a command on the GPU machine past one call's time limit. The device
# tool ends what a call leaves running, except processes in a session of
# their own, which run on while the machine stays warm (about 30 s after a
# call; /work/.library/device/README.md). So `start` launches the command in
# a new session and returns, and `wait` follows it, in this call or the
# next, until it ends or a deadline passes. A long A/B, or a llama.cpp leg of
# the 1000-prompt workload, then spans calls without the machine idling.
#
#   tools/cuda/bg_job.sh start NAME -- CMD [ARGS...]   returns at once
#   tools/cuda/bg_job.sh wait NAME [SECONDS]            default 560: the log's last
#       HYLLM_JOB_TAIL (60) lines when the job ends (exit status: the job's) or
#       at the deadline (exit status 124: still running, wait again)
#   tools/cuda/bg_job.sh status NAME                    running, or the job's exit status
# The job's log and exit status are kept under /tmp/hyllm-jobs/NAME; with
# $OUT set, `wait` copies the log there, so that it comes back with the call.
set -uo pipefail
JOBS=${HYLLM_JOBS_DIR:-/tmp/hyllm-jobs}
usage() { sed -n '10,16p' "$0" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd=$1 name=$2
shift 2
dir=$JOBS/$name

running() { [[ -f $dir/pid && ! -f $dir/rc ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; }

case $cmd in
  start)
    [[ ${1:-} == -- ]] && shift
    [[ $# -ge 1 ]] || usage
    if running; then echo "job $name is already running (pid $(cat "$dir/pid"))" >&2; exit 1; fi
    rm -rf "$dir" && mkdir -p "$dir"
    # The quoted command runs in a new session, its status written when it ends.
    printf '%q ' "$@" > "$dir/cmd"
    setsid bash -c 'bash -c "$(cat "$1/cmd")" > "$1/log" 2>&1 < /dev/null; echo $? > "$1/rc"' _ "$dir" \
      > /dev/null 2>&1 < /dev/null &
    echo $! > "$dir/pid"
    echo "job $name started (pid $!): $(cat "$dir/cmd")"
    ;;
  wait)
    [[ -d $dir ]] || { echo "no job $name" >&2; exit 1; }
    deadline=$((SECONDS + ${1:-560}))
    while running && ((SECONDS < deadline)); do sleep 2; done
    [[ -n ${OUT:-} ]] && mkdir -p "$OUT" && cp "$dir/log" "$OUT/job_$name.log" 2>/dev/null
    tail -n "${HYLLM_JOB_TAIL:-60}" "$dir/log" 2>/dev/null
    if [[ -f $dir/rc ]]; then
      echo "job $name ended: exit status $(cat "$dir/rc")"
      exit "$(cat "$dir/rc")"
    fi
    if running; then echo "job $name still running after the deadline: wait again"; exit 124; fi
    echo "job $name is gone without an exit status (the machine was given back?)"
    exit 1
    ;;
  status)
    if running; then echo running; elif [[ -f $dir/rc ]]; then cat "$dir/rc"; else echo "no job $name"; fi
    ;;
  *) usage ;;
esac
