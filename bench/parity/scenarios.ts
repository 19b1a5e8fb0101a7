// The Jobs of the parity table (bench/parity/run.ts): what OpenKruise's Job Sidecar Terminator
// supports, and the mistakes it accepts, each a Job run once under Kruise's controller and once
// under sidecar-terminator. The kubelet simulator plays the containers (annotations script the
// main containers' exits and the sidecars' reactions to SIGTERM) and kruise-daemon.
import { ENV_IGNORE_EXIT_CODE, ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE } from '../../src/policy/index.ts';
import { simAnnotations } from '../../test/support/kubelet-simulator.ts';

export const QUICK_EXIT_IMAGE = 'registry.example.com/quick-exit:1.0';

interface Env {
  name: string;
  value?: string;
  valueFrom?: unknown;
}

interface Container {
  name: string;
  image: string;
  env?: Env[];
  /** The container's own restart policy and rules (Kubernetes 1.35+, container restart rules). */
  restartPolicy?: 'Always' | 'OnFailure' | 'Never';
  restartPolicyRules?: Array<{ action: 'Restart'; exitCodes: { operator: 'In' | 'NotIn'; values: number[] } }>;
}

export interface Scenario {
  id: string;
  /** What the Job does, in the words of the table. */
  title: string;
  restartPolicy: 'Never' | 'OnFailure';
  /** The pod asks for a virtual-kubelet node (the simulator's, labelled type=virtual-kubelet). */
  virtualNode?: boolean;
  containers: Container[];
  initContainers?: Container[];
  /** Simulator annotations (simAnnotations): exits and SIGTERM reactions. */
  annotations?: Record<string, string>;
  /** The Job's spec.podFailurePolicy. */
  podFailurePolicy?: { rules: Array<{ action: 'FailJob' | 'Ignore' | 'Count'; onExitCodes: { containerName?: string; operator: 'In' | 'NotIn'; values: number[] } }> };
  /** What the API server must keep of the Job (apiFeatures of test/support/control-plane.ts): run.ts skips the Job on an older one. */
  requires?: 'containerRestartRules';
  /**
   * Why the two differ in these aspects of the table (docs/migrating-from-openkruise.md says
   * the same). Other aspects must come out the same, but for the differences every Job shows
   * (bench/parity/run.ts, EVERY_JOB).
   */
  difference?: { aspects: Aspect[]; why: string };
}

/** What the table compares for each Job. */
export type Aspect = 'admission' | 'job' | 'pod' | 'stop' | 'crr' | 'events' | 'condition' | 'label';

const main = (name = 'main'): Container => ({ name, image: 'busybox:1.36' });
const sidecar = (name: string, ...env: Env[]): Container => ({ name, image: `registry.example.com/${name}:1.0`, env });
const whenJobExit = (value = 'true'): Env => ({ name: ENV_WHEN_JOB_EXIT, value });
const withImage = (value = QUICK_EXIT_IMAGE): Env => ({ name: ENV_WITH_IMAGE, value });
const ignoreExitCode: Env = { name: ENV_IGNORE_EXIT_CODE, value: 'true' };
const mainExits = (after: string, codes = '0') => ({ [simAnnotations.exitAfter('main')]: after, [simAnnotations.exitCode('main')]: codes });
/** The main's work needs the sidecar: a run that ends while it is stopped fails (exit 1), as a client of a proxy that is gone does. */
const mainNeeds = (sidecarName: string) => ({ [simAnnotations.needs('main')]: sidecarName });
/** A main its own rule restarts after exit code 42 (its restartPolicy Never otherwise). */
const restartedOn42: Container = { ...main(), restartPolicy: 'Never', restartPolicyRules: [{ action: 'Restart', exitCodes: { operator: 'In', values: [42] } }] };

/** Why Kruise's controller ends a Job the kubelet would finish when its main container is restarted by the container's own policy. */
const RESTARTED_MAIN =
  "Kruise's controller reads only the pod's restartPolicy (Never): it stops the sidecar after the main container's first exit, and the run the kubelet restarts finds it gone and fails; sidecar-terminator reads the container's own restartPolicy and rules, as the kubelet does, and waits for the last run";

const REFUSED = 'the Job would never complete: sidecar-terminator refuses it at `kubectl apply` (a controller-created pod or Job with the same mistake is admitted and handled as Kruise handles it)';

export const SCENARIOS: Scenario[] = [
  {
    id: 'never-kill',
    title: 'restartPolicy Never, the main container exits 0, one sidecar with `..._WHEN_JOB_EXIT=true`',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: mainExits('1s'),
  },
  {
    id: 'never-main-fails',
    title: 'restartPolicy Never, the main container exits 1',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: mainExits('1s', '1'),
  },
  {
    id: 'two-sidecars',
    title: 'two sidecars, markers `"true"` and `"TRUE"`',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit()), sidecar('sql', whenJobExit('TRUE'))],
    annotations: mainExits('1s'),
  },
  {
    id: 'two-mains',
    title: 'two main containers, exiting 1 s apart: the sidecar waits for both',
    restartPolicy: 'Never',
    containers: [main(), main('second'), sidecar('proxy', whenJobExit())],
    annotations: { ...mainExits('1s'), [simAnnotations.exitAfter('second')]: '2s' },
  },
  {
    id: 'on-failure',
    title: 'restartPolicy OnFailure, the main container exits 0',
    restartPolicy: 'OnFailure',
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: mainExits('1s'),
  },
  {
    id: 'on-failure-main-fails-once',
    title: 'restartPolicy OnFailure, the main container fails once (restarted by the kubelet), then exits 0',
    restartPolicy: 'OnFailure',
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: mainExits('1s', '1,0'),
  },
  {
    id: 'sidecar-exits-143',
    title: 'restartPolicy Never, the sidecar exits 143 on SIGTERM',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: { ...mainExits('1s'), [simAnnotations.onSigterm('proxy')]: 'exit143' },
  },
  {
    id: 'ignore-exit-code',
    title: 'restartPolicy Never, the sidecar exits 143 on SIGTERM, `..._IGNORE_EXIT_CODE=true`',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit(), ignoreExitCode)],
    annotations: { ...mainExits('1s'), [simAnnotations.onSigterm('proxy')]: 'exit143' },
  },
  {
    id: 'ignore-exit-code-on-failure',
    title: 'restartPolicy OnFailure, the sidecar exits 143 on SIGTERM, `..._IGNORE_EXIT_CODE=true`',
    restartPolicy: 'OnFailure',
    containers: [main(), sidecar('proxy', whenJobExit(), ignoreExitCode)],
    annotations: { ...mainExits('1s'), [simAnnotations.onSigterm('proxy')]: 'exit143' },
  },
  {
    id: 'sidecar-ignores-sigterm',
    title: 'restartPolicy Never, the sidecar ignores SIGTERM (killed after its grace period, 137)',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: { ...mainExits('1s'), [simAnnotations.onSigterm('proxy')]: 'ignore' },
  },
  {
    id: 'virtual-node-image',
    title: 'on a virtual-kubelet node, a sidecar with a quick-exit image',
    restartPolicy: 'Never',
    virtualNode: true,
    containers: [main(), sidecar('proxy', withImage())],
    annotations: mainExits('1s'),
  },
  {
    id: 'virtual-node-both-markers',
    title: 'on a virtual-kubelet node, a sidecar with `..._WHEN_JOB_EXIT=true` and a quick-exit image',
    restartPolicy: 'Never',
    virtualNode: true,
    containers: [main(), sidecar('proxy', whenJobExit(), withImage())],
    annotations: mainExits('1s'),
  },
  {
    id: 'normal-node-both-markers',
    title: 'on a normal node, a sidecar with `..._WHEN_JOB_EXIT=true` and a quick-exit image: the kill wins',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit(), withImage())],
    annotations: mainExits('1s'),
  },
  {
    id: 'virtual-node-without-image',
    title: 'on a virtual-kubelet node, a sidecar with `..._WHEN_JOB_EXIT=true` only',
    restartPolicy: 'Never',
    virtualNode: true,
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: mainExits('1s'),
    difference: { aspects: ['events'], why: 'nothing stops the sidecar in either; a Warning event says why' },
  },
  {
    id: 'normal-node-image-only',
    title: 'on a normal node, a sidecar with a quick-exit image only',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', withImage())],
    annotations: mainExits('1s'),
    difference: {
      aspects: ['job', 'pod', 'stop', 'events', 'condition', 'label'],
      why: 'Kruise ignores this sidecar on a normal node and the Job hangs; the quick-exit image is the one way to stop it the pod declares, and sidecar-terminator uses it',
    },
  },
  {
    id: 'duplicate-when-job-exit',
    title: '`..._WHEN_JOB_EXIT` defined twice, `"false"` then `"true"`',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit('false'), whenJobExit('true'))],
    annotations: mainExits('1s'),
  },
  {
    id: 'duplicate-quick-exit-image',
    title: 'on a virtual-kubelet node, the quick-exit image defined twice: the first one is used',
    restartPolicy: 'Never',
    virtualNode: true,
    containers: [main(), sidecar('proxy', withImage(), withImage('registry.example.com/other:2.0'))],
    annotations: mainExits('1s'),
  },
  {
    id: 'marker-value-yes',
    title: '`..._WHEN_JOB_EXIT="yes"` (not a boolean: unset for Kruise)',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', whenJobExit('yes'))],
    annotations: mainExits('1s'),
    difference: { aspects: ['admission', 'job', 'pod'], why: REFUSED },
  },
  {
    id: 'marker-value-from',
    title: '`..._WHEN_JOB_EXIT` set through `valueFrom` (unset for Kruise)',
    restartPolicy: 'Never',
    containers: [main(), sidecar('proxy', { name: ENV_WHEN_JOB_EXIT, valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } })],
    annotations: mainExits('1s'),
    difference: { aspects: ['admission', 'job', 'pod'], why: REFUSED },
  },
  {
    id: 'marker-on-init-container',
    title: 'a marker on an init container (no effect), and a sidecar with `..._WHEN_JOB_EXIT=true`',
    restartPolicy: 'Never',
    initContainers: [{ name: 'setup', image: 'busybox:1.36', env: [whenJobExit()] }],
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: mainExits('1s'),
  },
  {
    id: 'restart-rule-main',
    title: 'restartPolicy Never, a restart rule of the main container (`Restart` on exit code 42): it exits 42, is restarted, then exits 0; its work needs the sidecar',
    restartPolicy: 'Never',
    requires: 'containerRestartRules',
    containers: [restartedOn42, sidecar('proxy', whenJobExit())],
    annotations: { ...mainExits('1s', '42,0'), ...mainNeeds('proxy') },
    difference: { aspects: ['job', 'pod'], why: RESTARTED_MAIN },
  },
  {
    id: 'container-on-failure-main',
    title: "restartPolicy Never, the main container's own `restartPolicy: OnFailure`: it exits 1, is restarted, then exits 0; its work needs the sidecar",
    restartPolicy: 'Never',
    requires: 'containerRestartRules',
    containers: [{ ...main(), restartPolicy: 'OnFailure' }, sidecar('proxy', whenJobExit())],
    annotations: { ...mainExits('1s', '1,0'), ...mainNeeds('proxy') },
    difference: {
      aspects: ['job', 'pod'],
      why: `${RESTARTED_MAIN}; OnFailure restarts each failed run, so under Kruise the main fails again and again and the Job never ends`,
    },
  },
  {
    id: 'restart-rule-ignore-exit-code',
    title: 'as `restart-rule-main`, with a sidecar that exits 143 on SIGTERM and `..._IGNORE_EXIT_CODE=true`',
    restartPolicy: 'Never',
    requires: 'containerRestartRules',
    containers: [restartedOn42, sidecar('proxy', whenJobExit(), ignoreExitCode)],
    annotations: { ...mainExits('1s', '42,0'), ...mainNeeds('proxy'), [simAnnotations.onSigterm('proxy')]: 'exit143' },
    difference: {
      aspects: ['job', 'pod'],
      why: "Kruise's controller reads only the pod's restartPolicy (Never): after the main container's first exit (42) it sets the pod's phase to Failed, and the kubelet, which keeps a terminal phase, never runs the main again; sidecar-terminator waits for the run after the restart and sets the phase from it (Succeeded)",
    },
  },
  {
    id: 'pod-failure-policy-sidecar',
    title: 'a podFailurePolicy that fails the Job on any non-zero exit code of any container (`FailJob`, `NotIn [0]`, no `containerName`), the sidecar exits 143 on SIGTERM',
    restartPolicy: 'Never',
    podFailurePolicy: { rules: [{ action: 'FailJob', onExitCodes: { operator: 'NotIn', values: [0] } }] },
    containers: [main(), sidecar('proxy', whenJobExit())],
    annotations: { ...mainExits('1s'), [simAnnotations.onSigterm('proxy')]: 'exit143' },
  },
  {
    id: 'all-sidecars',
    title: 'every container marked as a sidecar',
    restartPolicy: 'Never',
    containers: [sidecar('worker', whenJobExit()), sidecar('proxy', whenJobExit())],
    difference: {
      aspects: ['admission', 'job', 'pod', 'stop', 'crr', 'events'],
      why: 'Kruise stops every container as soon as all of them run, cutting the work short; sidecar-terminator refuses the Job at `kubectl apply` (one created by a controller, or admitted in warn mode, is stopped as Kruise stops it)',
    },
  },
];

/** The Job manifest of a scenario (JSON, which kubectl reads as YAML). */
export function jobManifest(scenario: Scenario): Record<string, unknown> {
  const virtual = scenario.virtualNode
    ? { nodeSelector: { type: 'virtual-kubelet' }, tolerations: [{ key: 'virtual-kubelet.io/provider', operator: 'Exists', effect: 'NoSchedule' }] }
    : {};
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: scenario.id },
    spec: {
      // OnFailure: a container restart counts against the limit, as a failed pod does for Never.
      backoffLimit: scenario.restartPolicy === 'OnFailure' ? 3 : 0,
      ...(scenario.podFailurePolicy ? { podFailurePolicy: scenario.podFailurePolicy } : {}),
      template: {
        metadata: { annotations: scenario.annotations ?? {} },
        spec: {
          restartPolicy: scenario.restartPolicy,
          terminationGracePeriodSeconds: 2,
          ...virtual,
          ...(scenario.initContainers ? { initContainers: scenario.initContainers } : {}),
          containers: scenario.containers,
        },
      },
    },
  };
}
