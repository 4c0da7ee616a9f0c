#!/usr/bin/env bash
# Installs the node packages that test drivers and golden checks use (the
# official openai client, tokenizer and template oracles), for every
# package.json under tests/ and tools/ whose node_modules is missing or older
# than its lock file. Only tests use them: the product has no node at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
while IFS= read -r pkg; do
  dir=$(dirname "$pkg")
  if [[ ! -d $dir/node_modules || $dir/package-lock.json -nt $dir/node_modules ]]; then
    echo "npm: installing $dir"
    if [[ -f $dir/package-lock.json ]]; then
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    else
      (cd "$dir" && npm install --no-audit --no-fund --loglevel=error)
    fi
    touch "$dir/node_modules"
  fi
done < <(find tests tools -name package.json -not -path '*/node_modules/*' | sort)
