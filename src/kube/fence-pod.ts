// The policy's reading of a pod (src/policy/markers.ts, decide.ts), in CEL, for the fence: which
// containers are sidecars, the main containers' exit codes, and the phase they make.
import { ENV_WHEN_JOB_EXIT, ENV_WITH_IMAGE } from '../policy/index.ts';
import { and, group, holds, literal, or, ternary, variable } from './cel.ts';

/** The exit code a main container that has not exited stands for in `mainExitCodes`. */
export const NOT_EXITED = -1000;

export const TERMINAL_PHASES = ['Succeeded', 'Failed'];

/** A container's env, empty when it has none. */
export const env = (container: string): string => `${container}.?env.orValue([])`;

/** Whether one of the container's env entries named `name` is "true", in any case, as OpenKruise reads a marker. */
export const markedTrue = (container: string, name: string): string => `${env(container)}.exists(e, e.name == ${literal(name)} && e.?value.orValue("").lowerAscii() == "true")`;

/** The value of the container's first env entry named `name`, "" when there is none. */
export const firstEnvValue = (container: string, name: string): string =>
  group(ternary(`${env(container)}.exists(e, e.name == ${literal(name)})`, `${env(container)}.filter(e, e.name == ${literal(name)})[0].?value.orValue("")`, '""'));

/** A sidecar stopped by the kill mechanism: marked, or named in the pod's sidecars annotation (the variable namedSidecars). */
export const isKillSidecar = (container: string): string => group(or(markedTrue(container, ENV_WHEN_JOB_EXIT), `${container}.name in ${variable('namedSidecars')}`));

/** The first KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE entry's value, "" when there is none. */
export const quickExitImage = (container: string): string => firstEnvValue(container, ENV_WITH_IMAGE);

export const isSidecar = (container: string): string => group(or(isKillSidecar(container), `${quickExitImage(container)} != ""`));

/** A restartPolicy the trigger applies to (unset is Always). */
export const triggeredRestartPolicy = (pod: string): string => `${pod}.spec.?restartPolicy.orValue("Always") in ["Never", "OnFailure"]`;

/** The pod's phase is terminal. */
export const isTerminal = (pod: string): string => `${pod}.status.?phase.orValue("") in ${literal(TERMINAL_PHASES)}`;

/** The exit code of the pod's container `container` (a CEL variable), NOT_EXITED while it has not exited. */
export const exitCodeOf = (pod: string, container: string): string =>
  ternary(
    `${pod}.status.?containerStatuses.orValue([]).exists(s, s.name == ${container}.name && has(s.state) && has(s.state.terminated))`,
    `${pod}.status.containerStatuses.filter(s, s.name == ${container}.name)[0].state.terminated.exitCode`,
    String(NOT_EXITED),
  );

/** The exit code of each main container (one that is no sidecar). */
export const mainExitCodes = (pod: string): string => `${pod}.spec.containers.filter(c, !${isSidecar('c')}).map(c, ${exitCodeOf(pod, 'c')})`;

/** Every main container has exited, and there is one (codes: a list as mainExitCodes makes it). */
export const mainsExited = (codes: string): string => and(`${codes}.size() > 0`, `!${codes}.exists(code, code == ${NOT_EXITED})`);

/** The pod's phase is the one its main containers' exit codes make (decide.ts phaseOfMains): Succeeded when all exited 0, else Failed. */
export const phaseOfMains = (codes: string, pod: string): string =>
  group(ternary(`${codes}.all(code, code == 0)`, holds(`${pod}.status.?phase`, '"Succeeded"'), holds(`${pod}.status.?phase`, '"Failed"')));
