# Paddock's bash kernel prelude (internal/sandboxd/interpreter): sandboxd sends it first to a
# `bash --noprofile --norc -s` that reads its commands on stdin, then one `__pd_cell` line per
# cell. Cells run in this shell, so cwd, variables and functions persist; their stdin is
# /dev/null and the protocol's descriptors are closed to them. SIGINT returns from the cell.
__pd_run() {
  trap 'trap : INT; return 130' INT
  eval "$1"
}
__pd_cell() {
  __pd_run "$1" </dev/null 3<&- 4>&-
  __pd_st=$?
  trap : INT
  printf '%s' "$__PD_MARK"
  printf '%s' "$__PD_MARK" >&2
  printf '{"type":"done","status":%d,"marks":["stdout","stderr"]}\n' "$__pd_st" >&4
}
trap : INT
printf '{"type":"ready"}\n' >&4
