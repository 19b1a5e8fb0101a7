# The failed test points of a TAP log, each with the subtests it sits in and the first lines of its
# diagnostics, for the end of a run: a CI log is often read from its tail, far from the failure.
#   awk -f scripts/tap-failures.awk LOG
function indent_of(line) { match(line, /^ */); return RLENGTH / 4 }
/^ *# Subtest: / {
  depth = indent_of($0)
  name = $0
  sub(/^ *# Subtest: /, "", name)
  path[depth] = name
  next
}
/^ *not ok [0-9]+/ {
  depth = indent_of($0)
  point = $0
  sub(/^ *not ok [0-9]+ -? ?/, "", point)
  where = ""
  for (level = 0; level < depth; level++) where = where path[level] " > "
  print "not ok: " where point
  failures++
  diag = 1
  shown = 0
  next
}
diag && /^ *---$/ { next }
diag && /^ *\.\.\.$/ { diag = 0; next }
diag && /^ +/ {
  if (shown < 12) print "    " substr($0, 3 + 4 * depth)
  shown++
  next
}
{ diag = 0 }
END { if (failures) print failures " failed test point(s)" }
