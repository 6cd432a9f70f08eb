#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each:
#   scripts/fuzz.sh [DURATION]     (default 20s per target)
# Seed corpora live in each package's testdata/fuzz/; new failing inputs
# land there too, and then fail `make test` until fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-20s}
fail=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -h -o '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "== $pkg $target ($time)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime 5s "$pkg"; then
      fail=$((fail + 1))
    fi
  done
done
echo "fuzz: $fail target(s) failed"
[ "$fail" = 0 ]
