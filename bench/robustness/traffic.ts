// The Jobs of a robustness run: each kind a manifest as a user would `kubectl apply` it, and the
// outcome its main containers give (what the Job must end with, whatever the faults). Simulated
// kinds run on the kubelet simulator's nodes (thousands of them, for scale; the simulator reads its
// instructions from annotations); real kinds on the real node, where every stop is a real one.
// Each main that needs its sidecar says so: on the simulator a run that ends while its sidecar is
// gone exits 1, on the real node each run first waits for the sidecar's port and exits 2 if it is
// closed, so a sidecar stopped too early fails the Job, not only the ledger's timestamps.
import type { V1Container } from '@kubernetes/client-node';
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, POD_ANNOTATIONS } from '../../src/policy/index.ts';
import { simAnnotations } from '../../test/support/kubelet-simulator.ts';
import { ignoreExitCodeSidecar, imageSidecar, jobYaml, killSidecar, main, type JobOptions } from '../../test/support/pods.ts';
import { testContainer } from '../../test/support/real-stack.ts';
import type { Outcome } from './ledger.ts';

export type Place = 'sim' | 'real';

export interface JobKind {
  name: string;
  place: Place;
  /** How often it is picked, against the other kinds of its place. */
  weight: number;
  outcome: Outcome;
  /** Container restart rules (Kubernetes 1.35+): left out where the API server drops them. */
  restartRules?: true;
  /** The Job's options, for a draw in [0, 1) (how long the work takes). */
  job(draw: number): JobOptions;
}

export interface Nodes {
  sim: string;
  virtual: string;
  real: string;
}

const SIDECAR_PORT = 8080;

/** A simulated pod's instructions: each main's exit after `seconds` with these exit codes (one per run, the last repeating), needing `needs`. */
function simulated(mains: Record<string, { seconds: number; codes?: string }>, needs: string): Record<string, string> {
  const annotations: Record<string, string> = {};
  for (const [name, { seconds, codes }] of Object.entries(mains)) {
    annotations[simAnnotations.exitAfter(name)] = `${seconds.toFixed(1)}s`;
    if (codes) annotations[simAnnotations.exitCode(name)] = codes;
    annotations[simAnnotations.needs(name)] = needs;
  }
  return annotations;
}

/** Work of 1 to 6 seconds on the simulator, 1 to 4 on the real node. */
const simSeconds = (draw: number) => 1 + 5 * draw;
const realSeconds = (draw: number) => 1 + 3 * draw;

/** A real main: waits for its sidecar's port at each run, works, exits (failing its first `failTimes` runs with `failExit`). */
function realMain(draw: number, extra: { exit?: number; failTimes?: number; failExit?: number; restart?: Partial<V1Container> } = {}): V1Container {
  const args = ['main', '--wait-tcp', `127.0.0.1:${SIDECAR_PORT}`, '--wait-timeout', '30s', '--sleep', `${realSeconds(draw).toFixed(1)}s`];
  if (extra.exit !== undefined) args.push('--exit', String(extra.exit));
  if (extra.failTimes) args.push('--fail-times', String(extra.failTimes), '--fail-exit', String(extra.failExit ?? 1), '--state', '/state/runs');
  return testContainer('main', args, [], { ...extra.restart, ...(extra.failTimes ? { volumeMounts: [{ name: 'state', mountPath: '/state' }] } : {}) });
}

const realSidecar = (env: Array<{ name: string; value: string }> = [], args: string[] = []) =>
  testContainer('proxy', ['sidecar', '--listen', `:${SIDECAR_PORT}`, ...args], [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }, ...env]);

/** A real pod's spec: on the real node, a short grace period, and the state volume a restarted main counts its runs in. */
const realSpec = (node: string) => ({ nodeSelector: { 'kubernetes.io/hostname': node }, terminationGracePeriodSeconds: 5, volumes: [{ name: 'state', emptyDir: {} }] });

/** Every kind, for these nodes; those with restart rules only where the API server has them. */
export function jobKinds(nodes: Nodes, restartRules: boolean): JobKind[] {
  return allKinds(nodes).filter((kind) => restartRules || !kind.restartRules);
}

function allKinds(nodes: Nodes): JobKind[] {
  const onSim = { nodeName: nodes.sim };
  const onVirtual = { nodeName: nodes.virtual, tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Exists' }] };
  const restartOn42 = { restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] };
  return [
    { name: 'sim-signal', place: 'sim', weight: 5, outcome: 'Complete', job: (d) => ({ annotations: simulated({ main: { seconds: simSeconds(d) } }, 'proxy'), spec: onSim, containers: [main(), killSidecar()] }) },
    { name: 'sim-two-mains', place: 'sim', weight: 2, outcome: 'Complete', job: (d) => ({ annotations: simulated({ main: { seconds: simSeconds(d) }, report: { seconds: simSeconds(1 - d) } }, 'proxy'), spec: onSim, containers: [main(), main('report'), killSidecar()] }) },
    { name: 'sim-fail', place: 'sim', weight: 1, outcome: 'Failed', job: (d) => ({ annotations: simulated({ main: { seconds: simSeconds(d), codes: '3' } }, 'proxy'), spec: onSim, containers: [main(), killSidecar()] }) },
    {
      name: 'sim-ignore-exit-code', place: 'sim', weight: 1, outcome: 'Complete',
      job: (d) => ({ annotations: { ...simulated({ main: { seconds: simSeconds(d) } }, 'sql'), [simAnnotations.onSigterm('sql')]: 'exit143' }, spec: onSim, containers: [main(), ignoreExitCodeSidecar()] }),
    },
    { name: 'sim-on-failure', place: 'sim', weight: 1, outcome: 'Complete', job: (d) => ({ restartPolicy: 'OnFailure', annotations: simulated({ main: { seconds: simSeconds(d), codes: '1,0' } }, 'proxy'), spec: onSim, containers: [main(), killSidecar()] }) },
    {
      name: 'sim-restart-rule', place: 'sim', weight: 1, outcome: 'Complete', restartRules: true,
      job: (d) => ({ annotations: simulated({ main: { seconds: simSeconds(d), codes: '42,0' } }, 'proxy'), spec: onSim, containers: [main('main', 'busybox:1.36', restartOn42), killSidecar()] }),
    },
    { name: 'virtual-image', place: 'sim', weight: 2, outcome: 'Complete', job: (d) => ({ annotations: simulated({ main: { seconds: simSeconds(d) } }, 'logs'), spec: onVirtual, containers: [main(), imageSidecar()] }) },
    { name: 'real-signal', place: 'real', weight: 3, outcome: 'Complete', job: (d) => ({ spec: realSpec(nodes.real), containers: [realMain(d), realSidecar()] }) },
    { name: 'real-fail', place: 'real', weight: 1, outcome: 'Failed', job: (d) => ({ spec: realSpec(nodes.real), containers: [realMain(d, { exit: 3 }), realSidecar()] }) },
    {
      name: 'real-http', place: 'real', weight: 1, outcome: 'Complete',
      job: (d) => ({ annotations: { [`${POD_ANNOTATIONS.stopPrefix}proxy`]: `POST http://localhost:${SIDECAR_PORT}/quitquitquit` }, spec: realSpec(nodes.real), containers: [realMain(d), realSidecar([], ['--exit-on-request'])] }),
    },
    { name: 'real-ignore-exit-code', place: 'real', weight: 1, outcome: 'Complete', job: (d) => ({ spec: realSpec(nodes.real), containers: [realMain(d), realSidecar([{ name: ENV_IGNORE_EXIT_CODE, value: 'true' }], ['--on-term', '1'])] }) },
    { name: 'real-restart-rule', place: 'real', weight: 1, outcome: 'Complete', restartRules: true, job: (d) => ({ spec: realSpec(nodes.real), containers: [realMain(d, { failTimes: 1, failExit: 42, restart: restartOn42 }), realSidecar()] }) },
    { name: 'real-on-failure', place: 'real', weight: 1, outcome: 'Complete', job: (d) => ({ restartPolicy: 'OnFailure', spec: realSpec(nodes.real), containers: [realMain(d, { failTimes: 1, failExit: 1 }), realSidecar()] }) },
  ];
}

/** The manifest of one Job of `kind`. */
export const jobManifest = (kind: JobKind, name: string, draw: number): string => jobYaml(name, kind.job(draw));
