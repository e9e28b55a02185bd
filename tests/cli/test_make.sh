#!/usr/bin/env bash
# The Makefile's `make run` builds what running needs, mqrd and mqr, and no test or doc
# example (make -n: the recipe as make would run it, nothing run).
# usage: test_make.sh SOURCE_DIR
set -u
src=$1
out=$(make -n -C "$src" run BUILD=/nonexistent-build 2>&1)
builds=$(echo "$out" | grep "cmake --build")
if [ -n "$builds" ] && ! echo "$builds" | grep -qv -- "--target mqrd mqr"; then
  echo "ok   make-run-targets"
  echo "make: 1 passed, 0 failed"
else
  echo "FAIL make-run-targets: $builds"
  echo "make: 0 passed, 1 failed"
  exit 1
fi
