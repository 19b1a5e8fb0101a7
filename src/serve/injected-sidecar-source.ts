// The cluster's injected-sidecar policy (--injected-sidecars), as serve holds it: read and checked
// at start, where a bad file stops serve (exit 2, naming the file, the entry and the fix); read
// again every --injected-sidecars-check-interval, where a bad change is kept out: the last good
// policy stays in force, and a warning, the metrics and a Warning event on the add-on's own pod
// say so. The file is compared by its content: the kubelet swaps a ConfigMap volume's files by
// a symlink, which leaves the file's own mtime as it was. The webhook reads current() at each admission.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { CoreV1Api } from '@kubernetes/client-node';
import { Counter, Gauge, type Registry } from 'prom-client';
import { eventBody } from '../kube/events.ts';
import { apiErrorMessage } from '../kube/api-errors.ts';
import type { Logger } from '../logger.ts';
import { INJECTED_POLICY_INVALID_REASON, clip, type InjectedSidecarPolicy } from '../policy/index.ts';
import { parseInjectedSidecarPolicy } from '../policy/injected-sidecar-file.ts';
import { UsageError } from '../usage-error.ts';

/** An Event's message is cut to this length, its clipping mark included (the API server's limit for a note). */
const MAX_EVENT_MESSAGE = 1024;

/** The add-on's own pod, from the POD_NAME and POD_NAMESPACE its Deployment sets (the downward API). */
export function ownPodOf(env: NodeJS.ProcessEnv): { name: string; namespace: string } | undefined {
  return env.POD_NAME && env.POD_NAMESPACE ? { name: env.POD_NAME, namespace: env.POD_NAMESPACE } : undefined;
}

/** The policy of the file at `path`, or a UsageError naming the file and every problem with its fix. */
export function loadInjectedSidecarPolicy(path: string): { policy: InjectedSidecarPolicy; text: string } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--injected-sidecars ${path}: cannot read the policy file: ${(error as Error).message}`);
  }
  const parsed = parseInjectedSidecarPolicy(text);
  if ('errors' in parsed) throw new UsageError(`--injected-sidecars ${path}: ${problems(parsed.errors)}; serve does not start with this policy`);
  return { policy: parsed.policy, text };
}

const problems = (errors: readonly string[]) => `${errors.length === 1 ? 'an error' : `${errors.length} errors`}: ${errors.join('; ')}`;

export interface InjectedSidecarPolicySourceOptions {
  path: string;
  /** The policy read at start (loadInjectedSidecarPolicy) and the text it was read from. */
  loaded: { policy: InjectedSidecarPolicy; text: string };
  /** Between two reads; 0: read at start only. */
  checkIntervalMs: number;
  logger: Logger;
  metrics: Registry;
  /** Where a bad change is also told: an event on the add-on's own pod; none when the pod is not known. */
  ownPod?: { name: string; namespace: string; core: CoreV1Api };
  /** How the file is read; fs's readFile by default. */
  read?: (path: string) => Promise<string>;
}

export class InjectedSidecarPolicySource {
  private readonly options: InjectedSidecarPolicySourceOptions;
  private policy: InjectedSidecarPolicy;
  /** What the last read found: the file's text, or why it could not be read; only a change is acted on. */
  private lastRead: string;
  private readonly listeners: Array<(policy: InjectedSidecarPolicy) => void> = [];
  private readonly valid: Gauge;
  private readonly reloads: Counter<'result'>;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> = Promise.resolve();

  constructor(options: InjectedSidecarPolicySourceOptions) {
    this.options = options;
    this.policy = options.loaded.policy;
    this.lastRead = options.loaded.text;
    this.valid = new Gauge({
      name: 'sidecar_terminator_injected_sidecars_policy_valid',
      help: '1 while the --injected-sidecars file as last read is the policy in force; 0 after a change that cannot be used (the last good policy stays in force).',
      registers: [options.metrics],
    });
    this.reloads = new Counter({
      name: 'sidecar_terminator_injected_sidecars_policy_reloads_total',
      help: 'Changes of the --injected-sidecars file read since start: ok (the new policy is in force) or error (it cannot be used; the last good policy stays).',
      labelNames: ['result'] as const,
      registers: [options.metrics],
    });
    this.valid.set(1);
    for (const result of ['ok', 'error']) this.reloads.inc({ result }, 0);
  }

  /** The policy in force. */
  current(): InjectedSidecarPolicy {
    return this.policy;
  }

  /** `listener` is called with each new policy put in force. */
  onChange(listener: (policy: InjectedSidecarPolicy) => void): void {
    this.listeners.push(listener);
  }

  /** Reads the file again every checkIntervalMs until stop(). */
  start(): void {
    const { logger, path, checkIntervalMs } = this.options;
    logger.info({ path, entries: this.policy.entries.map((entry) => entry.name) }, 'injected-sidecar policy in force');
    if (checkIntervalMs <= 0) return;
    this.timer = setInterval(() => void this.check(), checkIntervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.checking;
  }

  /**
   * One read of the file, acted on when it changed; one at a time. Never rejects: a failure (a
   * listener that throws) is logged, and the next read goes on, as the interval's does.
   */
  check(): Promise<void> {
    this.checking = this.checking
      .then(() => this.readOnce())
      .catch((error: unknown) => this.options.logger.error({ err: error, path: this.options.path }, 'acting on the injected-sidecar policy file failed; it is read again at the next check'));
    return this.checking;
  }

  private async readOnce(): Promise<void> {
    const { path, read = (file: string) => readFile(file, 'utf8') } = this.options;
    let text: string;
    try {
      text = await read(path);
    } catch (error) {
      const reason = `cannot read the policy file: ${(error as Error).message}`;
      if (this.changed(`\0${reason}`)) await this.refuse([reason]);
      return;
    }
    if (!this.changed(text)) return;
    const parsed = parseInjectedSidecarPolicy(text);
    if ('errors' in parsed) {
      await this.refuse(parsed.errors);
      return;
    }
    this.policy = parsed.policy;
    this.valid.set(1);
    this.reloads.inc({ result: 'ok' });
    this.options.logger.info({ path, entries: this.policy.entries.map((entry) => entry.name) }, 'injected-sidecar policy changed; the new one is in force');
    for (const listener of this.listeners) listener(this.policy);
  }

  private changed(read: string): boolean {
    if (read === this.lastRead) return false;
    this.lastRead = read;
    return true;
  }

  /** A change that cannot be used: told in the log, the metrics and an event; the policy in force stays. */
  private async refuse(errors: readonly string[]): Promise<void> {
    const { path, logger, ownPod } = this.options;
    this.valid.set(0);
    this.reloads.inc({ result: 'error' });
    const message = `--injected-sidecars ${path} changed and cannot be used (${problems(errors)}); the policy read before stays in force until the file is fixed`;
    logger.warn({ path, errors }, message);
    if (!ownPod) return;
    const involvedObject = { apiVersion: 'v1', kind: 'Pod', name: ownPod.name, namespace: ownPod.namespace };
    const name = `${ownPod.name}.${Date.now().toString(16)}${randomBytes(4).toString('hex')}`;
    try {
      await ownPod.core.createNamespacedEvent({ namespace: ownPod.namespace, body: eventBody(name, involvedObject, 'Warning', INJECTED_POLICY_INVALID_REASON, clip(message, MAX_EVENT_MESSAGE - 3)) });
    } catch (error) {
      logger.warn({ error: apiErrorMessage(error), reason: INJECTED_POLICY_INVALID_REASON }, 'cannot record the event on this pod; the log line above says the same');
    }
  }
}
