# shellcheck shell=bash
# Timed steps for tools/dev and .ci/run, sourced by both.
#
#   step NAME CMD [ARGS...]   runs CMD, records NAME and its wall time
#   on_exit CMD               runs CMD (a string) when the script exits
#
# When the script exits, for any reason, the steps run so far are printed
# as a table (a failing step last, marked FAILED), so that the end of a log
# says where the time went. Steps may nest: an inner table is printed by
# the script that ran it (tools/dev under .ci/run).

step_rows=()
step_current=""
step_current_start=0
step_cleanups=()

step() {
  local name="$1" start=$SECONDS
  shift
  step_current="$name"
  step_current_start=$start
  printf '==> [%s] %s\n' "$(date +%T)" "$name" >&2
  "$@"
  step_rows+=("$((SECONDS - start))|$name|ok")
  step_current=""
}

on_exit() {
  step_cleanups+=("$1")
}

steps_report() {
  local status=$? row seconds name result total=0 cleanup
  for cleanup in "${step_cleanups[@]}"; do eval "$cleanup" || true; done
  if [[ -n "$step_current" ]]; then
    step_rows+=("$((SECONDS - step_current_start))|$step_current|FAILED")
  fi
  ((${#step_rows[@]} > 0)) || return "$status"
  printf '\n%s: wall time of each step\n' "${steps_title:-$(basename "$0")}" >&2
  printf '  %8s  %-7s %s\n' seconds result step >&2
  for row in "${step_rows[@]}"; do
    IFS='|' read -r seconds name result <<<"$row"
    total=$((total + seconds))
    printf '  %8d  %-7s %s\n' "$seconds" "$result" "$name" >&2
  done
  printf '  %8d  %-7s %s\n\n' "$total" "" "in all" >&2
  return "$status"
}

trap steps_report EXIT
