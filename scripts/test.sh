#!/usr/bin/env bash
# The tests, in two tiers (docs/TESTING.md):
#   scripts/test.sh           the fast tier: unit, golden, errors, hacks (compiled and checked up to
#                             the launch), e2e against a scripted worker; every test not in
#                             tests/slow.txt. About 10 minutes on 2 cores.
#   scripts/test.sh --slow    the slow tier alone: the tests listed in tests/slow.txt
#   scripts/test.sh --all     both
# Further arguments go to ctest (e.g. -R Optimize). GPU cases skip with their reason where there
# is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
tier=fast
case "${1:-}" in
  --slow) tier=slow; shift ;;
  --all) tier=all; shift ;;
  --fast) shift ;;
  -h|--help) sed -n 2,9p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
export KSOL_CACHE_DIR=${KSOL_CACHE_DIR:-$PWD/build/test-cache}
slow=$(grep -v '^\s*#' tests/slow.txt | grep -v '^\s*$' | sed 's/\./\\./g' | paste -sd '|' -)
cmake --build build -j "$(nproc)" >/dev/null
cd build
# A name in tests/slow.txt that ctest does not list (a renamed test) would leave the slow tier quietly.
listed=$(ctest -N | sed -n 's/^ *Test *#[0-9]*: //p')
for t in $(grep -v '^\s*#' ../tests/slow.txt | grep -v '^\s*$'); do
  grep -qxF "$t" <<<"$listed" || { echo "scripts/test.sh: tests/slow.txt names '$t', which ctest does not list" >&2; exit 2; }
done
case $tier in
  fast) exec ctest --output-on-failure -j "$(nproc)" -E "^($slow)\$" "$@" ;;
  slow) exec ctest --output-on-failure -j "$(nproc)" -R "^($slow)\$" "$@" ;;
  all) exec ctest --output-on-failure -j "$(nproc)" "$@" ;;
esac
