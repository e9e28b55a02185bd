# Sourced by the CLI tests: expect NAME EXIT STDOUT STDERR_SUBSTRING -- COMMAND... runs the
# command and checks its exit status, its whole stdout ("*": any) and that stderr holds the
# substring; it counts into $passed and $failed and writes scratch files in $tmp.
expect() {
  local name=$1 want_rc=$2 want_out=$3 want_err=$4
  shift 5
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local out
  out=$(cat "$tmp/out")
  if [ "$rc" != "$want_rc" ]; then
    echo "FAIL $name: exit $rc, expected $want_rc"; cat "$tmp/err"; failed=$((failed + 1)); return
  fi
  if [ "$want_out" != "*" ] && [ "$out" != "$want_out" ]; then
    echo "FAIL $name: stdout"; echo "--- expected"; echo "$want_out"; echo "--- got"; echo "$out"
    failed=$((failed + 1)); return
  fi
  if [ -n "$want_err" ] && ! grep -qF -- "$want_err" "$tmp/err"; then
    echo "FAIL $name: stderr lacks '$want_err'"; cat "$tmp/err"; failed=$((failed + 1)); return
  fi
  echo "ok   $name"
  passed=$((passed + 1))
}
