# The failed test points of a TAP log, each with the subtests it sits in and the first lines of its
# diagnostics, for the end of a run: a CI log is often read from its tail, far from the failure.
#   awk [-v max=LINES] -f scripts/tap-failures.awk LOG
# A failed assertion is listed with each subtest and file around it (they fail with it). At most
# `max` lines (200) are printed, so that the caller needs no `head`, whose early exit would end a
# `set -o pipefail` script.
BEGIN { if (max == "") max = 200 }
function say(line) { if (printed++ < max) print line }
function indent_of(line) { match(line, /^ */); return RLENGTH / 4 }
# A YAML diagnostics block: shown (its first lines) when it follows a failed point; whatever it
# holds (a test's output quoted in it) is never read as points.
/^ *---$/ && !yaml { yaml = 1; shown = 0; next }
yaml && /^ *\.\.\.$/ { yaml = 0; showing = 0; next }
yaml {
  if (showing && shown++ < 12) say("    " substr($0, 3 + 4 * depth))
  next
}
{ showing = 0 }
/^ *# Subtest: / {
  level = indent_of($0)
  name = $0
  sub(/^ *# Subtest: /, "", name)
  path[level] = name
  next
}
/^ *not ok [0-9]+/ && !/# (TODO|SKIP)/ {
  depth = indent_of($0)
  point = $0
  sub(/^ *not ok [0-9]+ -? ?/, "", point)
  where = ""
  for (level = 0; level < depth; level++) where = where path[level] " > "
  say("not ok: " where point)
  failures++
  showing = 1
}
END {
  if (printed > max) print "... " printed - max " more lines"
  if (failures) print failures " failed points (an assertion, and each subtest and file around it)"
}
