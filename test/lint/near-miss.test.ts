// `sidecar-terminator lint` and near-miss markers: a warning at the line and column of the name,
// in a Job's template and a CronJob's as on a pod, and the exit code of warnings (0).
import t from 'tap';
import type { LintFinding } from '../../src/lint/report.ts';
import { runCli } from '../cli/run.ts';

const MANIFESTS = `apiVersion: batch/v1
kind: Job
metadata:
  name: backup
spec:
  template:
    metadata:
      annotations:
        sidecar-terminator.io/sidecar: cloud-sql-proxy
    spec:
      restartPolicy: Never
      containers:
        - name: backup
          image: backup:1
        - name: cloud-sql-proxy
          image: cloud-sql-proxy:2
          env:
            - name: KRUISE_TERMINATE_SIDECAR_WITH_IMAGE
              value: busybox:1.36
---
apiVersion: batch/v1
kind: CronJob
metadata:
  name: nightly
spec:
  schedule: "@daily"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
            - name: report
              image: report:1
            - name: proxy
              image: envoy:1
              env:
                - name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT
                  value: "true"
                - name: SIDECAR_TERMINATOR_STOPP
                  value: envoy
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
        - name: web
          image: web:1
          env:
            - name: KRUISE_TERMINATE_SIDECAR_WITH_IMAGE
              value: busybox:1.36
`;

t.test('text: each near miss a warning naming the marker meant; warnings alone exit 0', async (t) => {
  const run = await runCli(['lint', '-'], { input: MANIFESTS });
  t.equal(run.code, 0);
  const warnings = run.stdout.split('\n').filter((line) => line.includes(': warning: '));
  t.match(warnings, [
    /^<stdin>: Job\/backup: warning: spec\.template\.metadata\.annotations\[sidecar-terminator\.io\/sidecar\]: not an annotation the add-on reads, so it has no effect, but close to sidecar-terminator\.io\/sidecars; /,
    /^<stdin>: Job\/backup: warning: spec\.template\.spec\.containers\[1\]\.env\[0\]\.name: "KRUISE_TERMINATE_SIDECAR_WITH_IMAGE": .* but close to KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE; /,
    /^<stdin>: CronJob\/nightly: warning: spec\.jobTemplate\.spec\.template\.spec\.containers\[1\]\.env\[1\]\.name: "SIDECAR_TERMINATOR_STOPP": .* but close to SIDECAR_TERMINATOR_STOP; /,
  ]);
  t.equal(warnings.length, 3, 'none for the Deployment: its pods never finish, so markers do nothing there');
  t.match(run.stdout, /^3 objects checked in 1 file: 0 errors, 3 warnings$/m);
});

t.test('JSON: located at the name in the source (its key, as every field)', async (t) => {
  const run = await runCli(['lint', '-o', 'json', '-'], { input: MANIFESTS });
  const findings = (JSON.parse(run.stdout) as { findings: LintFinding[] }).findings.filter((finding) => finding.rule === 'near-miss-marker');
  const lines = MANIFESTS.split('\n');
  const at = (finding: LintFinding) => lines[finding.line - 1]!.slice(finding.column - 1);
  t.same(findings.map((finding) => [finding.object, finding.container, finding.severity, at(finding)]), [
    ['Job/backup', undefined, 'warning', 'sidecar-terminator.io/sidecar: cloud-sql-proxy'],
    ['Job/backup', 'cloud-sql-proxy', 'warning', 'name: KRUISE_TERMINATE_SIDECAR_WITH_IMAGE'],
    ['CronJob/nightly', 'proxy', 'warning', 'name: SIDECAR_TERMINATOR_STOPP'],
  ]);
  t.match(findings[0], { fix: /^Write the marker's name exactly/ });
});
