#!/usr/bin/env bash
# Builds the variants of an A/B here (the GPU machine has no toolchain for the
# whole tree) and packs them for the device: each variant is the working tree
# with zero or more one-line edits, built incrementally in one build folder,
# its binaries copied to .carry/ab/<binary>_<name>; the tree and the build
# folder are left as they were found (the edits undone, the tree rebuilt).
# Then tools/cuda/pack_serve_bundle.sh packs them beside the tree's own hyllm.
# While it runs, a REV variant's files are in the index: commit nothing until it ends.
#
#   tools/cuda/build_variants.sh VARIANT...
#   VARIANT = name                                the working tree as it is
#           | name=FILE:OLD=>NEW[;FILE:OLD=>NEW...]  each OLD (a fixed string, which
#                                                 must occur exactly once) replaced by NEW
#           | name@REV                            the tree of git revision REV (src/ and tests/,
#                                                 so that its test and bench binaries build too)
#   HYLLM_VARIANT_TARGETS="hyllm tests/cuda/test_cuda_ops"   what each variant builds (build paths)
#   HYLLM_BUILD=build                             the build folder
#
# Example: fp8_gemv one K block ahead against main, and main at the previous commit:
#   tools/cuda/build_variants.sh main \
#     'gemv1=src/backend/cuda/fp8_gemv.cu:bool kTwoAhead = NT <= 3=>bool kTwoAhead = false' prev@HEAD~1
# then on the GPU machine: HYLLM_AB_BINS="main=/tmp/sb/bin/hyllm_main gemv1=/tmp/sb/bin/hyllm_gemv1 ..."
# (an OLD or NEW holding ';' cannot be written: ';' separates edits).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${HYLLM_BUILD:-build}
TARGETS=${HYLLM_VARIANT_TARGETS:-hyllm}
OUTDIR=$ROOT/.carry/ab
[[ $# -ge 1 ]] || { sed -n '2,23p' "$0"; exit 2; }
[[ -f $BUILD/build.ninja ]] || { echo "no $BUILD/build.ninja: configure and build the tree first" >&2; exit 1; }
mkdir -p "$OUTDIR"
LOCK=/tmp/hyllm-build.lock

build() {
  flock "$LOCK" ninja -C "$BUILD" $(for t in $TARGETS; do basename "$t"; done) > /tmp/build_variants.log 2>&1 \
    || { tail -30 /tmp/build_variants.log >&2; return 1; }
}

collect() {  # name
  for t in $TARGETS; do
    cp "$BUILD/$t" "$OUTDIR/$(basename "$t")_$1"
    echo "  $OUTDIR/$(basename "$t")_$1"
  done
}

# Restores whatever a variant changed, then rebuilds the tree as found.
BACKUP=$(mktemp -d)
STASHED=0
REV_CHECKED_OUT=
restore() {
  # Last edit first: edits to one file back up its content before each, so
  # the first backup, restored last, is the file as found.
  local i
  for ((i = $(ls "$BACKUP" | grep -c '\.orig$') - 1; i >= 0; i--)); do
    cp "$BACKUP/$i.orig" "$(cat "$BACKUP/$i.path")"
  done
  rm -f "$BACKUP"/*
  if [[ -n $REV_CHECKED_OUT ]]; then
    # Back to HEAD's src/ and tests/ (index and tree), without the files
    # only REV has, then the uncommitted changes that were stashed.
    git checkout -q HEAD -- src tests
    # (out of the index too: `git checkout REV -- src` staged them).
    git diff --name-only --diff-filter=A HEAD "$REV_CHECKED_OUT" -- src tests | xargs -r git rm -q -f --
    REV_CHECKED_OUT=
    if [[ $STASHED == 1 ]]; then git stash pop -q; fi
    STASHED=0
  fi
}
trap 'restore; rm -rf "$BACKUP"' EXIT

for v in "$@"; do
  case $v in
    *@*)
      name=${v%%@*} rev=${v#*@}
      git rev-parse -q --verify "$rev^{commit}" > /dev/null || { echo "no revision $rev" >&2; exit 1; }
      if ! git diff --quiet HEAD -- src tests; then git stash push -q -- src tests && STASHED=1; fi
      REV_CHECKED_OUT=$(git rev-parse "$rev")
      git checkout -q "$rev" -- src tests
      # Files HEAD has and REV lacks would build into REV's binaries: gone
      # until the restore checks HEAD's src/ and tests/ out again.
      git diff --name-only --diff-filter=A "$rev" HEAD -- src tests | xargs -r rm -f --
      ;;
    *=*)
      name=${v%%=*}
      IFS=';' read -r -a edits <<< "${v#*=}"
      i=0
      for e in "${edits[@]}"; do
        file=${e%%:*} rest=${e#*:}
        old=${rest%%=>*} new=${rest#*=>}
        [[ -f $file ]] || { echo "$name: no file $file" >&2; exit 1; }
        count=$(grep -cF -- "$old" "$file" || true)
        [[ $count == 1 ]] || { echo "$name: '$old' occurs $count times in $file (must be once)" >&2; exit 1; }
        cp "$file" "$BACKUP/$i.orig" && echo "$file" > "$BACKUP/$i.path"
        OLD=$old NEW=$new python3 -c 'import os,sys; p=sys.argv[1]; s=open(p).read(); open(p,"w").write(s.replace(os.environ["OLD"], os.environ["NEW"], 1))' "$file"
        i=$((i + 1))
      done
      ;;
    *) name=$v ;;
  esac
  echo "variant $name"
  build
  collect "$name"
  restore
done
echo "rebuilding the tree as found"
build
