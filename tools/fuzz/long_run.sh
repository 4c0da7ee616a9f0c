#!/usr/bin/env bash
# A long fuzzing campaign over the libFuzzer targets of tests/fuzz, one
# target after another on one core (nice), each for SECONDS. Uses the
# sanitizer build (scripts/test-sanitizers.sh makes build-san/) and keeps
# going past crashes (fork mode), so that one run can find several bugs;
# inputs that crash, hang or run out of memory land in build-san/fuzz/<name>/.
# Prints a table last: runs, coverage, corpus and findings per target.
#
#   tools/fuzz/long_run.sh [SECONDS_PER_TARGET] [TARGET ...]   (default 480 s, every target)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
SECONDS_PER_TARGET=${1:-480}
shift || true
BUILD=${HYLLM_SAN_BUILD:-$ROOT/build-san}
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
fi
export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
rows=()
for name in "${targets[@]}"; do
  bin=$BUILD/fuzz/fuzz_$name
  [[ -x $bin ]] || { rows+=("| $name | not built | | | | |"); continue; }
  work=$BUILD/fuzz/$name
  mkdir -p "$work/corpus"
  dict=()
  [[ -f tests/fuzz/dicts/$name.dict ]] && dict=(-dict="tests/fuzz/dicts/$name.dict")
  log=$work/long_run.log
  start=$(date +%s)
  # Fork mode restarts the target per job; the HTTP target starts a server
  # and loads a model each time, so it runs in one process (stopping at a
  # crash) instead.
  mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  [[ $name == http ]] && mode=()
  nice -n 10 "$bin" "${mode[@]}" -max_total_time="$SECONDS_PER_TARGET" -timeout=60 -rss_limit_mb=3072 \
    -artifact_prefix="$work/" "${dict[@]}" "$work/corpus" "tests/fuzz/corpus/$name" > "$log" 2>&1
  secs=$(($(date +%s) - start))
  # Status lines: fork mode "#N: cov: C ft: F corp: K exec/s E oom/timeout/crash: a/b/c time: T ...",
  # one process "#N  NEW|REDUCE|pulse|DONE  cov: C ft: F corp: K/size ...".
  last=$(grep -E "^#[0-9]+(: |\s+[A-Z]+\s+)cov:" "$log" | tail -1)
  runs=$(sed -nE 's/^#([0-9]+).*/\1/p' <<< "$last")
  cov=$(sed -nE 's/.* cov: ([0-9]+) .*/\1/p' <<< "$last")
  ft=$(sed -nE 's/.* ft: ([0-9]+) .*/\1/p' <<< "$last")
  corp=$(sed -nE 's/.* corp: ([0-9]+)[ /].*/\1/p' <<< "$last")
  otc=$(sed -nE 's|.* oom/timeout/crash: ([0-9/]+) .*|\1|p' <<< "$last")
  if ((${#mode[@]} == 0)); then
    found=$(ls "$work" | grep -cE '^(crash|timeout|oom|leak)-')
    otc="stopped at a finding: $found"
    ((found == 0)) && otc="0/0/0"
  fi
  rows+=("| $name | $secs s | ${runs:-?} | ${cov:-?} / ${ft:-?} | ${corp:-?} | ${otc:-?} |")
  echo "== $name: $last"
done
echo
echo "| target | time | runs | coverage (edges / features) | corpus | oom / timeout / crash |"
echo "|---|---:|---:|---:|---:|---:|"
for r in "${rows[@]}"; do echo "$r"; done
