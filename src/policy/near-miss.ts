// Near-miss markers: an env var or pod annotation whose name is close to one the add-on reads,
// but is not it. Kubernetes takes any name, so `KRUISE_TERMINATE_SIDECAR_WITH_IMAGE` or
// `sidecar-terminator.io/sidecar` is silently ignored, and the Job hangs as if the add-on were
// not installed. The webhooks and lint warn with what this finds; it never changes what a pod is.
import type { Finding } from './findings.ts';
import { MARKER_NAMES } from './markers.ts';
import { INJECTED_POLICY_ANNOTATION, MANAGED_LABEL, MIGRATED_ANNOTATION, NATIVE_SIDECARS_OPT_OUT, PHASE_SET_ANNOTATION, POD_ANNOTATIONS, SKIPPED_ANNOTATION, STRICT_VALIDATION_ANNOTATION } from './names.ts';
import { fixClause, severityOf } from './rules.ts';
import { podMetadataPrefix } from './templates.ts';
import { arrayOf, isRecord, restartPolicyOf, type PodSpec } from './types.ts';

/** A name on a pod that is close to a marker's, and the marker it is taken for. */
export interface NearMiss {
  kind: 'env' | 'annotation';
  /** Where the name is: `spec.containers[1].env[0].name`, or `spec.template.metadata.annotations[KEY]`. */
  field: string;
  /** The name as written. */
  seen: string;
  /** The marker it is taken for; a per-container annotation with the container the key names (`stop.sidecar-terminator.io/proxy`), or `<container>`. */
  meant: string;
}

/** The pod annotations a Job's author writes, whole keys. */
const AUTHORED_KEYS = [POD_ANNOTATIONS.sidecars, POD_ANNOTATIONS.ignoreExitCode, STRICT_VALIDATION_ANNOTATION, NATIVE_SIDECARS_OPT_OUT.key] as const;
/** The keys the add-on writes itself: never a near miss, and meant only by a name close to one of them. */
const WRITTEN_KEYS = [MIGRATED_ANNOTATION, SKIPPED_ANNOTATION, PHASE_SET_ANNOTATION, INJECTED_POLICY_ANNOTATION, MANAGED_LABEL] as const;
const ANNOTATION_KEYS: readonly string[] = [...AUTHORED_KEYS, ...WRITTEN_KEYS];
/** The annotations whose key ends in a container's name. */
const PER_CONTAINER_PREFIXES = [POD_ANNOTATIONS.stopPrefix, POD_ANNOTATIONS.gracePeriodPrefix] as const;
/**
 * The project's other prefix in its domain: the kubelet simulator's (test/support/sim), which
 * plays a node in `make dev` and the end-to-end tests, read from the pods the examples and tests
 * create. Its keys are not for the add-on, and no near miss.
 */
const SIMULATOR_PREFIX = 'sim.sidecar-terminator.io/';
const CONTAINER_PLACEHOLDER = '<container>';
/** The domain of the add-on's annotations. */
const DOMAIN = nameOf('sidecar-terminator.io');
/** The names compared with, normalized: the markers, the keys, the per-container prefixes each with its domain (`stop.sidecar-terminator.io`). */
const MARKERS = MARKER_NAMES.map((text) => nameOf(text));
const AUTHORED = AUTHORED_KEYS.map((text) => nameOf(text));
const WRITTEN = WRITTEN_KEYS.map((text) => nameOf(text));
const PREFIX_DOMAINS = PER_CONTAINER_PREFIXES.map((prefix) => ({ prefix, domain: nameOf(prefix.slice(0, -1)) }));
/**
 * The start every Kruise marker shares. An env var that begins with it names nothing else, so any
 * name after it is a mistake. Not so `SIDECAR_TERMINATOR_`: serve's and lint's own settings use it.
 */
const KRUISE_FAMILY = 'KRUISE_TERMINATE_SIDECAR';

/**
 * At most this many near misses are looked for in one pod spec, more than any pod has by mistake:
 * each costs a few comparisons of whole names, and a hostile pod may hold a hundred thousand.
 */
export const MAX_NEAR_MISSES = 100;

/**
 * Names longer than this are not compared: no marker is half as long, and the comparison's cost
 * stays bounded on a hostile pod with thousands of huge names.
 */
const MAX_NAME_LENGTH = 253;

/**
 * The rule. Names are compared without case and with `-`, `_` and `.` alike within a word
 * boundary (env: `_`; annotation names: `-`), since those are the slips that look right. A name is
 * a near miss of a marker when, so compared, it
 * - equals it (only the case or a separator differs);
 * - is within a few edits of it: one per ten characters, plus one, counting a swap of two
 *   neighbours as one edit (a dropped, doubled, swapped or wrong letter, a plural), relative to
 *   the marker's length so that the long Kruise names allow a few slips and short names very few;
 * - has its words with a word dropped, added, or swapped with its neighbour (two such changes for
 *   a marker of six words or more, the Kruise markers), and at most one letter wrong in one word
 *   (`KRUISE_TERMINATE_WHEN_JOB_EXIT`, `SIDECAR_TERMINATE_WHEN_JOB_EXIT`), keeping three words and
 *   60% of the marker's length: fewer are ordinary names (`SIDECAR_STOP`);
 * - holds it whole between separators (`..._WHEN_JOB_EXIT_IMAGE`), or is a whole-word part of it
 *   at least 60% as long (`..._GRACE_PERIOD` for `..._GRACE_PERIOD_SECONDS`, a dropped
 *   `KRUISE_`): shorter parts are ordinary words (`GRACE_PERIOD_SECONDS`, `SIDECAR`);
 * - or starts with a marker family's prefix and names nothing the family has
 *   (`KRUISE_TERMINATE_SIDECAR_WITH_IMAGE`, `sidecar-terminator.io/sidecar-names`, an unknown
 *   `*.sidecar-terminator.io/` prefix, or that domain misspelt or reworded as a whole: not a part
 *   of it, as `terminator.io`).
 * Of the markers it may be, the one meant shares the most words with it, then is the fewest edits
 * away (the bare domain means `sidecar-terminator.io/sidecars`, the nearest key a user writes).
 */
export function nearMissEnvName(name: string): string | undefined {
  if ((MARKER_NAMES as readonly string[]).includes(name) || name.length > MAX_NAME_LENGTH) return undefined;
  return envNames.judge(name);
}

function judgeEnvName(name: string): string | undefined {
  const seen = nameOf(normalizeEnv(name));
  const family = seen.text.startsWith(KRUISE_FAMILY);
  return bestOf(seen, MARKERS.map((marker) => ({ meant: marker.text, compared: marker, close: family || isClose(seen, marker) })));
}

/** The annotation key a pod annotation's key is a near miss of (nearMissEnvName gives the rule), or undefined. */
export function nearMissAnnotation(key: string): string | undefined {
  if (ANNOTATION_KEYS.includes(key) || [...PER_CONTAINER_PREFIXES, SIMULATOR_PREFIX].some((prefix) => key.startsWith(prefix)) || key.length > MAX_NAME_LENGTH) return undefined;
  return annotationKeys.judge(key);
}

function judgeAnnotation(key: string): string | undefined {
  const seen = nameOf(normalizeKey(key));
  const slash = seen.text.indexOf('/');
  const domain = nameOf(slash < 0 ? '' : seen.text.slice(0, slash));
  const name = key.slice(slash + 1);
  // The whole domain, misspelt or reworded: a part of it, as `terminator.io`, is someone else's.
  const ours =
    domain.text !== '' &&
    (domain.text === DOMAIN.text || domain.text.endsWith(`.${DOMAIN.text}`) || isCloseWhole(domain, DOMAIN) || isCloseWhole(nameOf(domain.text.slice(domain.text.indexOf('.') + 1)), DOMAIN));
  const candidates = [
    ...AUTHORED.map((known) => ({ meant: known.text, compared: known, close: ours || isClose(seen, known) })),
    // The add-on writes these: only one misspelt is taken for one (the bare domain is not `.../managed`).
    ...WRITTEN.map((known) => ({ meant: known.text, compared: known, close: isMisspelt(seen.text, known.text) })),
    ...PREFIX_DOMAINS.map(({ prefix, domain: prefixDomain }) => {
      // The prefix, not the domain, misspelt: `sidecar-terminator` is the domain without .io.
      const misspelt = isClose(domain, prefixDomain) && !isMisspelt(domain.text, DOMAIN.text);
      // Under a misspelt or unknown prefix the name is the container's: `stop.sidecar-terminater.io/proxy` is stop.sidecar-terminator.io/proxy.
      const meant = `${prefix}${misspelt || domain.text.endsWith(`.${DOMAIN.text}`) ? name : CONTAINER_PLACEHOLDER}`;
      return { meant, compared: nameOf(normalizeKey(meant)), close: ours || misspelt };
    }),
  ];
  return bestOf(seen, candidates);
}

/**
 * Names already judged, and what they were judged: the pods of one Job, and the containers of one
 * pod, repeat the same env names, and judging one costs microseconds of comparisons (a fifth of
 * an admission's CPU when every name was judged again). The judgement is a function of the name
 * alone, so a name judged once is judged the same. At most MEMO_NAMES are kept (each at most
 * MAX_NAME_LENGTH long); when full, the memory starts again empty, so a pod with thousands of
 * different names costs what it did without it, and no more memory.
 */
class JudgedNames {
  private readonly judged = new Map<string, string | null>();
  private readonly judgeName: (name: string) => string | undefined;

  constructor(judgeName: (name: string) => string | undefined) {
    this.judgeName = judgeName;
  }

  /** Forgets every name judged (the growth test times the judging itself, as for names never seen). */
  forget(): void {
    this.judged.clear();
  }

  judge(name: string): string | undefined {
    const known = this.judged.get(name);
    if (known !== undefined) return known ?? undefined;
    const meant = this.judgeName(name);
    if (this.judged.size >= MEMO_NAMES) this.judged.clear();
    this.judged.set(name, meant ?? null);
    return meant;
  }
}

/** The names judged and kept, of each kind. */
export const MEMO_NAMES = 2048;

const envNames = new JudgedNames(judgeEnvName);
const annotationKeys = new JudgedNames(judgeAnnotation);

/** Forgets the names judged so far: the next pod's are judged as if never seen. */
export function forgetJudgedNames(): void {
  envNames.forget();
  annotationKeys.forget();
}

/**
 * The near misses on a pod spec's containers (their env) and its pod's annotations (or its
 * template's), for a pod that can finish: markers do nothing with restartPolicy Always, whose
 * pods the add-on never stops, so a near miss there changes nothing either.
 */
export function nearMisses(location: { spec: unknown; annotations: Record<string, unknown>; fieldPrefix: string }): NearMiss[] {
  const spec: PodSpec = isRecord(location.spec) ? location.spec : {};
  const restartPolicy = restartPolicyOf(spec);
  if (restartPolicy !== 'Never' && restartPolicy !== 'OnFailure') return [];
  const found: NearMiss[] = [];
  const annotationsPath = `${podMetadataPrefix(location.fieldPrefix)}.annotations`;
  for (const key of Object.keys(location.annotations)) {
    const meant = nearMissAnnotation(key);
    if (meant !== undefined) found.push({ kind: 'annotation', field: `${annotationsPath}[${key}]`, seen: key, meant });
    if (found.length === MAX_NEAR_MISSES) return found;
  }
  for (const [index, container] of arrayOf(spec.containers).entries()) {
    if (!isRecord(container)) continue;
    for (const [position, env] of arrayOf(container.env).entries()) {
      if (!isRecord(env) || typeof env.name !== 'string') continue;
      const meant = nearMissEnvName(env.name);
      if (meant !== undefined) found.push({ kind: 'env', field: `${location.fieldPrefix}.containers[${index}].env[${position}].name`, seen: env.name, meant });
      if (found.length === MAX_NEAR_MISSES) return found;
    }
  }
  return found;
}

/** The near misses as findings, in the words of the webhooks and lint. */
export function nearMissFindings(location: Parameters<typeof nearMisses>[0]): Finding[] {
  return nearMisses(location).map(({ kind, field, seen, meant }) => ({
    rule: 'near-miss-marker',
    severity: severityOf('near-miss-marker'),
    field,
    // An annotation's key is in the field path already.
    ...(kind === 'env' ? { value: seen } : {}),
    detail: `not ${kind === 'env' ? 'a variable' : 'an annotation'} the add-on reads, so it has no effect, but close to ${meant}; ${fixClause('near-miss-marker')}`,
  }));
}

/** A name normalized (normalizeEnv, normalizeKey), and its words once wordsOf has split it. */
interface Name {
  readonly text: string;
  words: readonly string[] | undefined;
}

function nameOf(text: string): Name {
  return { text, words: undefined };
}

/** The name's words, split once if at all: most names are too short to compare by words. */
function wordsOf(name: Name): readonly string[] {
  return (name.words ??= name.text.split(SEPARATOR).filter((word) => word !== ''));
}

const SEPARATOR = /[-_./]/;

interface Candidate {
  /** The marker, as the finding names it. */
  meant: string;
  /** The marker normalized as the name is, to compare them. */
  compared: Name;
  /** Whether the name is a near miss of it. */
  close: boolean;
}

/** Of the candidates the name is close to, the one sharing the most words with it, then the fewest edits away. */
function bestOf(seen: Name, candidates: readonly Candidate[]): string | undefined {
  const words = new Set(wordsOf(seen));
  let best: { meant: string; shared: number; edits: number } | undefined;
  for (const candidate of candidates) {
    if (!candidate.close) continue;
    const shared = [...new Set(wordsOf(candidate.compared))].filter((word) => words.has(word)).length;
    const edits = distance(seen.text, candidate.compared.text, TIE_BREAK_EDITS);
    if (!best || shared > best.shared || (shared === best.shared && edits < best.edits)) best = { meant: candidate.meant, shared, edits };
  }
  return best?.meant;
}

/** Edits counted when choosing among candidates; beyond it they tie. */
const TIE_BREAK_EDITS = 16;

/** Whether a name is close to a marker, both normalized: see nearMissEnvName. */
function isClose(seen: Name, marker: Name): boolean {
  return isCloseWhole(seen, marker) || holdsWord(seen.text, marker.text) || (seen.text.length >= PART_SHARE * marker.text.length && holdsWord(marker.text, seen.text));
}

/** The least share of a marker's length a part of it, or a reworded name, keeps: shorter ones are ordinary words. */
const PART_SHARE = 0.6;

/** Whether a name is a marker with a few slips of its letters or of its words, both normalized. */
function isCloseWhole(seen: Name, marker: Name): boolean {
  return isMisspelt(seen.text, marker.text) || isReworded(seen, marker);
}

/** Whether a name is within a few edits of a marker: one per ten characters, plus one. */
function isMisspelt(seen: string, marker: string): boolean {
  const allowed = Math.floor(marker.length / 10) + 1;
  return seen === marker || distance(seen, marker, allowed) <= allowed;
}

/** The fewest words a reworded name keeps: two are ordinary names (`SIDECAR_STOP`, `terminator.io`). */
const MIN_REWORDED_WORDS = 3;

/**
 * Whether a name is a marker with its words changed a little: a word dropped, added, or swapped
 * with its neighbour, one such change per three words (at least one), and at most one word with a
 * letter wrong. Few words and a budget of at most two changes keep the search small.
 */
function isReworded(seen: Name, marker: Name): boolean {
  const changes = Math.max(1, Math.floor(wordsOf(marker).length / 3));
  if (seen.text.length < PART_SHARE * marker.text.length || wordsOf(seen).length < MIN_REWORDED_WORDS || Math.abs(wordsOf(seen).length - wordsOf(marker).length) > changes) return false;
  return aligns(wordsOf(seen), 0, wordsOf(marker), 0, changes, 1);
}

/** Whether the words of a name from `i` on are a marker's from `j` on, within `changes` word changes and `slips` misspelt words. */
function aligns(seen: readonly string[], i: number, marker: readonly string[], j: number, changes: number, slips: number): boolean {
  // What is left of either is words added, or dropped.
  if (i === seen.length || j === marker.length) return seen.length - i + (marker.length - j) <= changes;
  if (seen[i] === marker[j] && aligns(seen, i + 1, marker, j + 1, changes, slips)) return true;
  if (slips > 0 && distance(seen[i]!, marker[j]!, 1) <= 1 && aligns(seen, i + 1, marker, j + 1, changes, slips - 1)) return true;
  if (changes === 0) return false;
  const swapped = seen[i] === marker[j + 1] && seen[i + 1] === marker[j];
  return aligns(seen, i, marker, j + 1, changes - 1, slips) || aligns(seen, i + 1, marker, j, changes - 1, slips) || (swapped && aligns(seen, i + 2, marker, j + 2, changes - 1, slips));
}

/** Env names in upper case with `_` between words, as the markers are written. */
function normalizeEnv(name: string): string {
  return name.toUpperCase().replace(/[-.\s]/g, '_');
}

/** Annotation keys in lower case with `-` between words, as the add-on's are written. */
function normalizeKey(key: string): string {
  return key.toLowerCase().replaceAll('_', '-');
}

/** Whether `whole` holds `part` starting and ending at word boundaries. */
function holdsWord(whole: string, part: string): boolean {
  if (part.length === 0 || part.length >= whole.length) return false;
  for (let at = whole.indexOf(part); at >= 0; at = whole.indexOf(part, at + 1)) {
    const before = at === 0 || SEPARATOR.test(whole[at - 1]!);
    const after = at + part.length === whole.length || SEPARATOR.test(whole[at + part.length]!);
    if (before && after) return true;
  }
  return false;
}

/**
 * The optimal string alignment distance of two strings (insertions, deletions, substitutions and
 * swaps of neighbours, one edit each), or max + 1 once it is more than max: strings whose lengths
 * differ by more are not compared at all, the start and end they share are not compared (a
 * marker's near miss shares most of it), and the rows stop when every cell exceeds max.
 */
function distance(first: string, second: string, max: number): number {
  if (Math.abs(first.length - second.length) > max) return max + 1;
  let start = 0;
  while (start < first.length && start < second.length && first[start] === second[start]) start++;
  let end = 0;
  while (end < first.length - start && end < second.length - start && first[first.length - 1 - end] === second[second.length - 1 - end]) end++;
  const a = first.slice(start, first.length - end);
  const b = second.slice(start, second.length - end);
  // One used up: the rest of the other is insertions (a plural, a doubled letter).
  if (a.length === 0 || b.length === 0) return Math.min(a.length + b.length, max + 1);
  const width = b.length + 1;
  // Three rows: the one before the previous (for a swap), the previous, the current.
  let before = new Uint16Array(width);
  let previous = new Uint16Array(width);
  for (let j = 1; j < width; j++) previous[j] = j;
  let current = new Uint16Array(width);
  for (let i = 1; i <= a.length; i++) {
    const ai = a.charCodeAt(i - 1);
    current[0] = i;
    let smallest = i;
    for (let j = 1; j <= b.length; j++) {
      const bj = b.charCodeAt(j - 1);
      let cell = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (ai === bj ? 0 : 1));
      if (i > 1 && j > 1 && ai === b.charCodeAt(j - 2) && a.charCodeAt(i - 2) === bj) cell = Math.min(cell, before[j - 2]! + 1);
      current[j] = cell;
      if (cell < smallest) smallest = cell;
    }
    if (smallest > max) return max + 1;
    [before, previous, current] = [previous, current, before];
  }
  return Math.min(previous[b.length]!, max + 1);
}
