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
