# Step timing for the scripts that run many steps (sourced by scripts/test.sh).
#
# `step "name"` ends the step before it and starts a new one; `timing_report` (run on
# exit) prints every step's wall time and warns, without failing, when the run took
# longer than TEST_BUDGET_SECONDS: the machine may be shared, but a run that grows past
# its budget should be seen when the slow suite is added, not when CI stops it.

TEST_BUDGET_SECONDS="${TEST_BUDGET_SECONDS:-1800}"
_timing_names=()
_timing_seconds=()
_timing_started=$SECONDS
_timing_current=""
_timing_current_start=$SECONDS

_timing_close() {
    if [ -n "$_timing_current" ]; then
        _timing_names+=("$_timing_current")
        _timing_seconds+=($((SECONDS - _timing_current_start)))
        _timing_current=""
    fi
}

step() {
    _timing_close
    _timing_current="$*"
    _timing_current_start=$SECONDS
    echo
    echo "==> $*"
}

# `timing_report [status]`: the run's exit status, $? when not given.
timing_report() {
    local rc=${1:-$?}
    _timing_close
    local total=$((SECONDS - _timing_started))
    echo
    echo "==> wall time per step"
    local i
    for i in "${!_timing_names[@]}"; do
        printf '%6ds  %s\n' "${_timing_seconds[$i]}" "${_timing_names[$i]}"
    done
    printf '%6ds  total (%s)\n' "$total" "$([ "$rc" -eq 0 ] && echo passed || echo "failed, exit $rc")"
    if [ "$total" -gt "$TEST_BUDGET_SECONDS" ]; then
        echo "warning: the run took ${total}s, past its budget of ${TEST_BUDGET_SECONDS}s:" \
            "find the step that grew (above) and make it proportionate" >&2
    fi
    return "$rc"
}
