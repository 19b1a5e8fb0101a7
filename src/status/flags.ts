// The flags of `sidecar-terminator status` (and `explain`), kubectl's where kubectl has them.
// None has an environment variable: the kubeconfig comes from $KUBECONFIG, as for kubectl.
import { bool, duration, oneOf, text, type FlagSpec } from '../config.ts';

export const STATUS_OUTPUTS = ['text', 'wide', 'json', 'yaml'] as const;
export type StatusOutput = (typeof STATUS_OUTPUTS)[number];

const kubectlLike = <T extends FlagSpec>(spec: T, short?: string): T => ({ ...spec, env: '', ...(short ? { short } : {}) });

export const STATUS_FLAGS = {
  namespace: kubectlLike(text('namespace', "Namespace of the pods; default: the kubeconfig context's namespace, else default.", ''), 'n'),
  allNamespaces: kubectlLike(bool('all-namespaces', 'Look at the managed pods of every namespace.'), 'A'),
  selector: kubectlLike(text('selector', 'Only the pods matching this label selector (as kubectl -l), besides the managed label.', ''), 'l'),
  all: kubectlLike(bool('all', 'List also the managed pods that have ended (phase Succeeded or Failed), not only those in flight.')),
  output: kubectlLike(oneOf('output', 'text: a table of the pods, or the story of pod/NAME; wide: the table with more columns; json or yaml: everything, for scripts.', STATUS_OUTPUTS, 'text'), 'o'),
  failAfter: kubectlLike(duration('fail-after', 'Exit 1 when a pod has waited longer than this for its sidecars to stop (its main containers done, sidecars still running); 0s never fails.', '0s')),
  kubeconfig: kubectlLike(text('kubeconfig', 'Kubeconfig file; default: $KUBECONFIG, else ~/.kube/config, else the in-cluster service account, as kubectl.', '')),
  context: kubectlLike(text('context', 'Kubeconfig context to use; default: its current context.', '')),
};

export type StatusFlags = { [K in keyof typeof STATUS_FLAGS]: (typeof STATUS_FLAGS)[K]['default'] };

export const EXIT = { ok: 0, stuck: 1, usage: 2, unreadable: 3 } as const;

export const STATUS_EXIT_CODES = `0 nothing is stuck, 1 a pod has waited longer than --fail-after for its
sidecars to stop, 2 a usage error (a flag, the context, the selector), 3 the cluster could not be
read (unreachable, the pod does not exist, or no permission to read pods).`;
