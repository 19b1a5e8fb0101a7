// Container image references, following the grammar of the distribution/reference package
// that Docker, containerd and Kubernetes use.

const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:]+\\])(?::[0-9]+)?`;
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = '[\\w][\\w.-]{0,127}';
const DIGEST = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}';
const REFERENCE = new RegExp(`^(${NAME})(?::(${TAG}))?(?:@(${DIGEST}))?$`);
const NAME_MAX_LENGTH = 255;

export interface ImageReference {
  /** Repository with its registry as written, e.g. `nginx` or `ghcr.io/org/app`. */
  name: string;
  tag: string | undefined;
  digest: string | undefined;
}

export function parseImageReference(reference: string): ImageReference | undefined {
  const match = REFERENCE.exec(reference);
  if (!match || match[1] === undefined || match[1].length > NAME_MAX_LENGTH) return undefined;
  return { name: match[1], tag: match[2], digest: match[3] };
}

/** The fully qualified form container runtimes pull: `nginx` is `docker.io/library/nginx:latest`. */
export function normalizeImage(reference: string): string {
  const parsed = parseImageReference(reference);
  if (!parsed) return reference;
  const [first, ...rest] = parsed.name.split('/');
  const hasRegistry = rest.length > 0 && (first!.includes('.') || first!.includes(':') || first === 'localhost');
  let name = hasRegistry ? parsed.name : `docker.io/${parsed.name}`;
  if (name.startsWith('docker.io/') && name.split('/').length === 2) name = name.replace('docker.io/', 'docker.io/library/');
  const tag = parsed.tag ?? (parsed.digest ? undefined : 'latest');
  return `${name}${tag ? `:${tag}` : ''}${parsed.digest ? `@${parsed.digest}` : ''}`;
}

export function isSameImage(a: string, b: string): boolean {
  return a === b || normalizeImage(a) === normalizeImage(b);
}

/**
 * Allowlist patterns match the image as written or in its normalized form; `*` matches any
 * run of characters, so `registry.example.com/quick-exit:*` allows every tag of one repository.
 */
export function isAllowedImage(image: string, patterns: readonly string[]): boolean {
  const candidates = [image, normalizeImage(image)];
  return patterns.some((pattern) => {
    const regex = new RegExp(`^${pattern.split('*').map(escapeRegExp).join('.*')}$`);
    return candidates.some((candidate) => regex.test(candidate));
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
