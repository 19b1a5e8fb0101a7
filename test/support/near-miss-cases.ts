// The common misspellings of every marker, each a near miss of the marker it names
// (test/policy/near-miss.test.ts holds src/policy/near-miss.ts to them), and each a name the
// validating webhook's matchConditions let through (test/kube/webhook-configurations.test.ts,
// test/e2e/near-miss.test.ts).
import {
  ENV_GRACE_PERIOD,
  ENV_IGNORE_EXIT_CODE,
  ENV_STOP,
  ENV_WHEN_JOB_EXIT,
  ENV_WITH_IMAGE,
  NATIVE_SIDECARS_OPT_OUT,
  PHASE_SET_ANNOTATION,
  POD_ANNOTATIONS,
  STRICT_VALIDATION_ANNOTATION,
} from '../../src/policy/index.ts';

const SIDECARS = POD_ANNOTATIONS.sidecars;
const IGNORING = POD_ANNOTATIONS.ignoreExitCode;

/** Misspellings of each env marker: [what the slip is, the name written]. */
export const ENV_MISSES: Record<string, Array<[string, string]>> = {
  [ENV_WHEN_JOB_EXIT]: [
    ['a dropped letter', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXT'],
    ['a doubled letter', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOBB_EXIT'],
    ['swapped letters', 'KRUISE_TERMINATE_SIDECAR_WEHN_JOB_EXIT'],
    ['a wrong letter', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIST'],
    ['plural', 'KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT'],
    ['plural at the end', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXITS'],
    ['lower case', 'kruise_terminate_sidecar_when_job_exit'],
    ['mixed case', 'Kruise_Terminate_Sidecar_When_Job_Exit'],
    ['hyphens for underscores', 'KRUISE-TERMINATE-SIDECAR-WHEN-JOB-EXIT'],
    ['dots for underscores', 'KRUISE.TERMINATE.SIDECAR.WHEN.JOB.EXIT'],
    ['a missing underscore', 'KRUISE_TERMINATE_SIDECAR_WHENJOB_EXIT'],
    ['KRUISE_ left out', 'TERMINATE_SIDECAR_WHEN_JOB_EXIT'],
    ['TERMINATE for TERMINATOR', 'KRUISE_TERMINATOR_SIDECAR_WHEN_JOB_EXIT'],
    ['another word for WHEN', 'KRUISE_TERMINATE_SIDECAR_ON_JOB_EXIT'],
    ['the family prefix alone', 'KRUISE_TERMINATE_SIDECAR'],
    ['a trailing blank', `${ENV_WHEN_JOB_EXIT} `],
  ],
  [ENV_WITH_IMAGE]: [
    ['WITH_IMAGE without WHEN_JOB_EXIT', 'KRUISE_TERMINATE_SIDECAR_WITH_IMAGE'],
    ['IMAGE without WITH', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_IMAGE'],
    ['IMAGE alone', 'KRUISE_TERMINATE_SIDECAR_IMAGE'],
    ['plural', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGES'],
    ['swapped letters', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WTIH_IMAGE'],
    ['an abbreviation', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMG'],
    ['lower case', ENV_WITH_IMAGE.toLowerCase()],
    ['a hyphen', 'KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH-IMAGE'],
    ['KRUISE_ left out', 'TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE'],
  ],
  [ENV_IGNORE_EXIT_CODE]: [
    ['a missing underscore', 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXITCODE'],
    ['plural', 'KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODES'],
    ['a dropped letter', 'KRUISE_TERMINATE_SIDECAR_IGNOR_EXIT_CODE'],
    ['plural sidecars', 'KRUISE_TERMINATE_SIDECARS_IGNORE_EXIT_CODE'],
    ['IGNORE left out', 'KRUISE_TERMINATE_SIDECAR_EXIT_CODE'],
    ['lower case', ENV_IGNORE_EXIT_CODE.toLowerCase()],
    ['hyphens', 'KRUISE-TERMINATE-SIDECAR-IGNORE-EXIT-CODE'],
  ],
  [ENV_STOP]: [
    ['a doubled letter', 'SIDECAR_TERMINATOR_STOPP'],
    ['swapped letters', 'SIDECAR_TERMINATOR_SOTP'],
    ['TERMINATE for TERMINATOR', 'SIDECAR_TERMINATE_STOP'],
    ['a word added', 'SIDECAR_TERMINATOR_STOP_METHOD'],
    ['the prefix alone', 'SIDECAR_TERMINATOR'],
    ['lower case', 'sidecar_terminator_stop'],
    ['hyphens', 'SIDECAR-TERMINATOR-STOP'],
  ],
  [ENV_GRACE_PERIOD]: [
    ['SECONDS left out', 'SIDECAR_TERMINATOR_GRACE_PERIOD'],
    ['singular', 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECOND'],
    ['a dropped letter', 'SIDECAR_TERMINATOR_GRACE_PERIOD_SECODS'],
    ['a missing underscore', 'SIDECAR_TERMINATOR_GRACEPERIOD_SECONDS'],
    ['TERMINATE for TERMINATOR', 'SIDECAR_TERMINATE_GRACE_PERIOD_SECONDS'],
    ['lower case', ENV_GRACE_PERIOD.toLowerCase()],
  ],
};

/** Misspellings of each annotation: [what the slip is, the key written]; a per-container key is meant with the container it names. */
export const ANNOTATION_MISSES: Record<string, Array<[string, string]>> = {
  [SIDECARS]: [
    ['singular', 'sidecar-terminator.io/sidecar'],
    ['a doubled letter', 'sidecar-terminator.io/sidecarss'],
    ['swapped letters', 'sidecar-terminator.io/sidecras'],
    ['upper case', 'sidecar-terminator.io/Sidecars'],
    ['a dot for the hyphen', 'sidecar.terminator.io/sidecars'],
    ['no hyphen', 'sidecarterminator.io/sidecars'],
    ['an underscore', 'sidecar_terminator.io/sidecars'],
    ['plural domain', 'sidecar-terminators.io/sidecars'],
    ['another top-level domain', 'sidecar-terminator.com/sidecars'],
    ['TERMINATE for TERMINATOR', 'sidecar-terminate.io/sidecars'],
    ['.io left out', 'sidecar-terminator/sidecars'],
    ['an unknown name under the domain', 'sidecar-terminator.io/sidecar-names'],
  ],
  [IGNORING]: [
    ['underscores', 'sidecar-terminator.io/ignore_exit_code'],
    ['a missing hyphen', 'sidecar-terminator.io/ignore-exitcode'],
    ['plural', 'sidecar-terminator.io/ignore-exit-codes'],
    ['camel case', 'sidecar-terminator.io/ignoreExitCode'],
  ],
  [STRICT_VALIDATION_ANNOTATION]: [['a dropped letter', 'sidecar-terminator.io/validaton']],
  [NATIVE_SIDECARS_OPT_OUT.key]: [['singular', 'sidecar-terminator.io/native-sidecar']],
  'stop.sidecar-terminator.io/proxy': [
    ['a misspelt domain', 'stop.sidecar-terminater.io/proxy'],
    ['a plural prefix', 'stops.sidecar-terminator.io/proxy'],
    ['another prefix', 'stop-method.sidecar-terminator.io/proxy'],
  ],
  'stop.sidecar-terminator.io/<container>': [
    ['the prefix as a name', 'sidecar-terminator.io/stop'],
    ['.io left out, the prefix as a name', 'sidecar-terminator/stop-proxy'],
  ],
  'grace-period-seconds.sidecar-terminator.io/proxy': [
    ['SECONDS left out', 'grace-period.sidecar-terminator.io/proxy'],
    ['singular', 'grace-period-second.sidecar-terminator.io/proxy'],
    ['underscores', 'grace_period_seconds.sidecar-terminator.io/proxy'],
  ],
  'grace-period-seconds.sidecar-terminator.io/<container>': [['the prefix as a name', 'sidecar-terminator.io/grace-period-seconds']],
  [PHASE_SET_ANNOTATION]: [['plural', 'sidecar-terminator.io/phase-sets']],
};
