# The failed test points of a TAP log, each with the subtests it sits in and its diagnostics, for
# the end of a run: a CI log is often read from its tail, far from the failure.
#   awk [-v max=LINES] -f scripts/tap-failures.awk LOG
# A failed assertion is shown with the first 40 lines of its diagnostics (a diff, the values
# compared, where it stands), blank lines left out: tap folds a long string over several lines,
# and a message cut short names nothing. Each subtest and file around it fails with it; of theirs
# only the lines that say how it ended are shown (exitCode, signal, timeout, expired, message).
# Every failed point is named; at most `max` lines (200) of diagnostics are printed, so that the
# caller needs no `head`, whose early exit would end a `set -o pipefail` script.
BEGIN { if (max == "") max = 200 }
function diagnostic(line) {
  if (printed++ < max) print "    " line
}
function indent_of(line) { match(line, /^ */); return RLENGTH / 4 }
# A YAML diagnostics block: shown when it follows a failed point; whatever it holds (a test's
# output quoted in it) is never read as points.
/^ *---$/ && !yaml { yaml = 1; shown = 0; next }
yaml && /^ *\.\.\.$/ { yaml = 0; showing = ""; next }
yaml {
  line = substr($0, 3 + 4 * depth)
  if (line ~ /^ *$/) next
  if (showing == "assertion" && shown++ < 40) diagnostic(line)
  if (showing == "subtest" && line ~ /^(exitCode|signal|timeout|expired|message):/) diagnostic(line)
  next
}
{ showing = "" }
# A subtest opens with this line, and its own point closes it at the same indentation.
/^ *# Subtest: / {
  level = indent_of($0)
  name = $0
  sub(/^ *# Subtest: /, "", name)
  path[level] = name
  open[level] = 1
  next
}
/^ *(not )?ok [0-9]+/ {
  depth = indent_of($0)
  closes = open[depth]
  open[depth] = 0
  if (!/^ *not ok/ || /# (TODO|SKIP)/) next
  point = $0
  sub(/^ *not ok [0-9]+ -? ?/, "", point)
  where = ""
  for (level = 0; level < depth; level++) where = where path[level] " > "
  print "not ok: " where point
  failures++
  showing = closes ? "subtest" : "assertion"
}
END {
  if (printed > max) print "... " printed - max " more lines of diagnostics"
  if (failures) print failures " failed points (an assertion, and each subtest and file around it)"
}
