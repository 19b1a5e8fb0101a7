// What every component of `serve` is given (composition.ts builds it), and how a component reads
// its listen address.
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger as PinoLogger } from 'pino';
import type { Registry } from 'prom-client';
import type { ServeConfig } from '../config.ts';
import type { Readiness } from '../health.ts';
import type { InjectedSidecarPolicySource } from './injected-sidecar-source.ts';
import { UsageError } from '../usage-error.ts';

/** What every component shares. */
export interface Context {
  config: ServeConfig;
  kubeConfig: KubeConfig;
  /** The add-on's own namespace. */
  namespace: string;
  logger: PinoLogger;
  /** One Prometheus registry for every component, served on /metrics. */
  metrics: Registry;
  /** Ready when every component says so; served on /readyz. */
  readiness: Readiness;
  /** Components add what their readiness depends on. */
  readinessChecks: Readiness[];
  /** The injected-sidecar policy (--injected-sidecars), which the webhook applies at admission; none without the flag. */
  injectedSidecars?: InjectedSidecarPolicySource;
}

/** `host:port`, `[ipv6]:port` or `:port` (all interfaces). */
export function parseListenAddress(address: string, flag: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(address);
  if (!match) throw new UsageError(`--${flag}: expected host:port, got ${JSON.stringify(address)}`);
  return { host: match[1] ?? (match[2] || '0.0.0.0'), port: Number(match[3]) };
}
