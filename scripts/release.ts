// `make release VERSION=x.y.z [PUSH=registry/prefix]`: the release, with no Docker, into
// release/<version>/ (docs/development.md, "Releasing"):
//   images/<name>/                 each published image (scripts/build-images.ts: the add-on, its
//                                  runtime base, and the images the chart runs on Job nodes) as an
//                                  OCI image layout holding one multi-architecture image index
//                                  (linux/amd64, linux/arm64), with the OCI annotations
//   sbom/<name>-linux-<arch>.cdx.json  a CycloneDX SBOM of what each image holds (scripts/sbom.ts)
//   sidecar-terminator-<version>.tgz   the Helm chart, its version and appVersion the release's
//   kubectl-sidecar_terminator-<version>-<os>-<arch>.tar.gz  the kubectl plugin as one executable
//                                  (a Node.js single executable application: that platform's node
//                                  with the CLI bundled in), which needs no Node.js installed
//   sidecar-terminator.yaml        the krew plugin manifest, with those archives' checksums
//   images.txt                     what a cluster pulls (and a mirror copies): each image by digest, and the chart
//   SHA256SUMS                     every file above (`sha256sum -c SHA256SUMS`)
//
// With --push, the images go to PREFIX/<name>:<version> with crane and the chart to
// oci://PREFIX/charts/sidecar-terminator with `helm push` (both built from the Go module proxy);
// credentials from REGISTRY_USERNAME and REGISTRY_PASSWORD when set (logged in for this run only),
// else from the logins crane and helm already have. A private CA: SSL_CERT_FILE.
//
//   node scripts/release.ts --version 1.2.3 [--out DIR] [--push REGISTRY/PREFIX]
//
// Reproducible: the images' `created` is the commit's time (or SOURCE_DATE_EPOCH), every layer and
// archive is written with sorted names, root ownership and a fixed time, so the same commit gives
// the same digests.
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import { bundle, bundleExecutable } from './bundle.ts';
import { ARCHITECTURES, PUBLISHED, SOURCE_URL, nodeBinary, nodeVersion, writeImageIndex, type ReleaseInfo, type WrittenIndex } from './build-images.ts';
import { imageSbom } from './sbom.ts';
import { IMAGE_REPOSITORY } from '../src/policy/names.ts';

const repoRoot = resolve(import.meta.dirname, '..');
/** Where the project publishes its releases: the chart's default image.registry. */
export const DEFAULT_PREFIX = IMAGE_REPOSITORY;
export const CHART = 'sidecar-terminator';
export const PLUGIN = 'kubectl-sidecar_terminator';

/** The platforms of the kubectl plugin: each with the npm registry's Node.js binary for it. */
export const PLUGIN_PLATFORMS = [
  { os: 'linux', arch: 'amd64', node: () => nodeBinary('amd64'), binary: PLUGIN },
  { os: 'linux', arch: 'arm64', node: () => nodeBinary('arm64'), binary: PLUGIN },
  { os: 'windows', arch: 'amd64', node: () => nodeBinary('win-x64'), binary: `${PLUGIN}.exe` },
] as const;

const log = (line: string) => process.stderr.write(`[release] ${line}\n`);

function git(args: string[]): string {
  return execFileSync('git', args, { cwd: repoRoot, encoding: 'utf8' }).trim();
}

function buildScript(script: string, args: string[] = []): string {
  return execFileSync('bash', [join(repoRoot, 'scripts', script), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
}

function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** A reproducible gzipped tar of `files` (names relative to `dir`). */
function tarGz(dir: string, files: string[], out: string, mtime: number): void {
  const tar = execFileSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', `--mtime=@${mtime}`, '-cf', '-', '-C', dir, ...files], { maxBuffer: 1024 * 1024 * 1024 });
  writeFileSync(out, gzipSync(tar, { level: 6 }));
}

export interface Release {
  dir: string;
  info: ReleaseInfo;
  images: WrittenIndex[];
  chart: string;
  plugins: { os: string; arch: string; archive: string; sha256: string }[];
}

export async function release(version: string, out: string): Promise<Release> {
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version)) throw new Error(`VERSION=${version} is not a version such as 1.2.3 (or 1.2.3-rc.1)`);
  const epoch = Number(process.env.SOURCE_DATE_EPOCH ?? git(['log', '-1', '--format=%ct']));
  const info: ReleaseInfo = { version, revision: git(['rev-parse', 'HEAD']), created: new Date(epoch * 1000).toISOString().replace('.000Z', 'Z'), repositoryPrefix: DEFAULT_PREFIX };
  if (git(['status', '--porcelain', '--untracked-files=no'])) log(`warning: the work tree differs from ${info.revision}, which the images name as their revision`);
  rmSync(out, { recursive: true, force: true });
  mkdirSync(join(out, 'sbom'), { recursive: true });
  const work = mkdtempSync(join(tmpdir(), 'st-release-'));
  try {
    // What esbuild puts into the add-on's bundles, for its SBOM (the layer is built from the same inputs).
    const bundleMeta = await bundle(['src/cli.ts'], join(work, 'dist'));
    const images = new Map<string, WrittenIndex>();
    for (const name of PUBLISHED) {
      log(`image ${name}: ${ARCHITECTURES.map((arch) => `linux/${arch}`).join(', ')}`);
      const written = writeImageIndex(name, join(out, 'images', name), info, images);
      images.set(name, written);
      for (const manifest of written.manifests) {
        const [own, total] = pulledBytes(join(out, 'images', name), name, manifest.digest, images);
        log(`image ${name} linux/${manifest.arch}: ${(total / 1048576).toFixed(1)} MiB to pull (gzipped layers${own === total ? '' : `, ${(own / 1048576).toFixed(2)} MiB of them its own above its base`})`);
        const sbom = imageSbom({
          repository: written.reference.slice(0, written.reference.lastIndexOf(':')),
          version,
          arch: manifest.arch,
          manifestDigest: manifest.digest,
          layers: manifest.layers.map((layer) => layer.tar),
          created: info.created,
          nodeVersion,
          bundle: bundleMeta,
        });
        writeFileSync(join(out, 'sbom', `${name}-linux-${manifest.arch}.cdx.json`), `${JSON.stringify(sbom, null, 2)}\n`);
      }
    }
    const chart = packageChart(version, out, work);
    const plugins = await pluginArchives(version, out, work, epoch);
    writeFileSync(join(out, `${CHART}.yaml`), krewManifest(version, plugins));
    writeFileSync(
      join(out, 'images.txt'),
      [...[...images.values()].map((image) => `${image.reference}@${image.digest}`), `oci://${DEFAULT_PREFIX}/charts/${CHART}:${version}`].join('\n') + '\n',
    );
    writeChecksums(out);
    return { dir: out, info, images: [...images.values()], chart, plugins };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * What a node pulls for one architecture's image: the gzipped layers its manifest lists, its own
 * (those its base does not have) and all of them, read from the OCI layout it was written to.
 */
function pulledBytes(layout: string, name: string, manifestDigest: string, images: Map<string, WrittenIndex>): [own: number, total: number] {
  const blob = (digest: string) => readFileSync(join(layout, 'blobs', ...digest.split(':')), 'utf8');
  const layers = (JSON.parse(blob(manifestDigest)) as { layers: { digest: string; size: number }[] }).layers;
  const others = [...images].filter(([other]) => other !== name).map(([, image]) => image);
  const baseDiffIds = new Set(others.flatMap((image) => image.manifests.flatMap((m) => m.layers.map((layer) => layer.diffId))));
  const mine = images.get(name)!.manifests.find((m) => m.digest === manifestDigest)!;
  const total = layers.reduce((sum, layer) => sum + layer.size, 0);
  const own = layers.filter((_, index) => !baseDiffIds.has(mine.layers[index]!.diffId)).reduce((sum, layer) => sum + layer.size, 0);
  return [own, total];
}

/** `helm package` with the release's version and appVersion (the image tag the chart defaults to). */
function packageChart(version: string, out: string, work: string): string {
  const helm = buildScript('build-helm.sh');
  const chartCopy = join(work, 'chart', CHART);
  cpSync(join(repoRoot, 'charts', CHART), chartCopy, { recursive: true });
  execFileSync(helm, ['package', chartCopy, '--version', version, '--app-version', version, '--destination', out], { stdio: ['ignore', 'ignore', 'inherit'] });
  log(`chart ${CHART}-${version}.tgz`);
  return join(out, `${CHART}-${version}.tgz`);
}

/**
 * The kubectl plugin per platform: the CLI bundled into one CommonJS file, turned into a Node.js
 * single executable application (`node --experimental-sea-config`, then postject writes the blob
 * into a copy of that platform's node), archived with the licenses.
 */
async function pluginArchives(version: string, out: string, work: string, mtime: number): Promise<Release['plugins']> {
  const script = join(work, 'plugin', 'cli.cjs');
  await bundleExecutable(script, version);
  const blob = join(work, 'plugin', 'cli.blob');
  const seaConfig = join(work, 'plugin', 'sea-config.json');
  writeFileSync(seaConfig, JSON.stringify({ main: script, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false, useSnapshot: false }));
  // The preparation blob holds the script, not code compiled for one CPU: one serves every platform.
  execFileSync(join(repoRoot, 'node_modules/.bin/node'), ['--experimental-sea-config', seaConfig], { stdio: ['ignore', 'ignore', 'inherit'] });
  const plugins: Release['plugins'] = [];
  for (const platform of PLUGIN_PLATFORMS) {
    const dir = join(work, 'plugin', `${platform.os}-${platform.arch}`);
    mkdirSync(dir, { recursive: true });
    const executable = join(dir, platform.binary);
    copyFileSync(platform.node(), executable);
    chmodSync(executable, 0o755);
    // postject warns about ELF notes it cannot name and the Windows signature it voids (the
    // executable is no longer the one Node.js signed): shown only when it fails.
    execFileSync(join(repoRoot, 'node_modules/.bin/postject'), [executable, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2', '--overwrite'], { stdio: ['ignore', 'pipe', 'pipe'] });
    copyFileSync(join(repoRoot, 'LICENSE'), join(dir, 'LICENSE'));
    copyFileSync(join(work, 'plugin', 'THIRD-PARTY-LICENSES.txt'), join(dir, 'THIRD-PARTY-LICENSES.txt'));
    const archive = join(out, `${PLUGIN}-${version}-${platform.os}-${platform.arch}.tar.gz`);
    tarGz(dir, [platform.binary, 'LICENSE', 'THIRD-PARTY-LICENSES.txt'], archive, mtime);
    plugins.push({ os: platform.os, arch: platform.arch, archive, sha256: sha256File(archive) });
    log(`kubectl plugin ${platform.os}/${platform.arch}: ${(statSync(archive).size / 1048576).toFixed(1)} MiB`);
  }
  return plugins;
}

/** The krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2): each archive's address and checksum. */
function krewManifest(version: string, plugins: Release['plugins']): string {
  const platforms = plugins
    .map((plugin) => {
      const file = plugin.archive.slice(plugin.archive.lastIndexOf('/') + 1);
      const binary = plugin.os === 'windows' ? `${PLUGIN}.exe` : PLUGIN;
      return `  - selector:
      matchLabels:
        os: ${plugin.os}
        arch: ${plugin.arch}
    uri: ${SOURCE_URL}/releases/download/v${version}/${file}
    sha256: ${plugin.sha256}
    bin: ${binary}
    files:
      - from: ${binary}
        to: .
      - from: LICENSE
        to: .
      - from: THIRD-PARTY-LICENSES.txt
        to: .`;
    })
    .join('\n');
  return `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: ${CHART}
spec:
  version: v${version}
  homepage: ${SOURCE_URL}
  shortDescription: Why a Job with sidecars still runs, pod by pod
  description: |
    Shows the Job pods managed by sidecar-terminator and, for one pod, the whole
    story: which containers are sidecars, what the add-on did to stop them, what
    it waits for now, and what to change when it cannot finish the Job.
    Reads pods, events, nodes, ContainerRecreateRequests and webhook configurations.
  platforms:
${platforms}
`;
}

function writeChecksums(out: string): void {
  const files = readdirSync(out, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name !== 'SHA256SUMS')
    .map((entry) => relative(out, join(entry.parentPath, entry.name)))
    .sort();
  writeFileSync(join(out, 'SHA256SUMS'), files.map((file) => `${sha256File(join(out, file))}  ${file}`).join('\n') + '\n');
}

/**
 * Pushes a release: each image index with crane (its digest checked against the one written), the
 * chart with `helm push`. Logs in for this run only when REGISTRY_USERNAME and REGISTRY_PASSWORD are set.
 */
export function push(written: Release, prefix: string): string[] {
  const crane = buildScript('build-go-tool.sh', ['crane']);
  const helm = buildScript('build-helm.sh');
  const host = prefix.split('/')[0]!;
  const env = { ...process.env };
  const config = mkdtempSync(join(tmpdir(), 'st-release-auth-'));
  try {
    const { REGISTRY_USERNAME: username, REGISTRY_PASSWORD: password } = process.env;
    if (username && password) {
      env.DOCKER_CONFIG = config;
      env.HELM_REGISTRY_CONFIG = join(config, 'helm-registry.json');
      execFileSync(crane, ['auth', 'login', host, '--username', username, '--password-stdin'], { env, input: password, stdio: ['pipe', 'ignore', 'inherit'] });
      execFileSync(helm, ['registry', 'login', host, '--username', username, '--password-stdin'], { env, input: password, stdio: ['pipe', 'ignore', 'inherit'] });
    }
    const pushed: string[] = [];
    for (const image of written.images) {
      const name = image.reference.slice(DEFAULT_PREFIX.length + 1);
      const target = `${prefix}/${name}`;
      const answer = execFileSync(crane, ['push', join(written.dir, 'images', name.slice(0, name.lastIndexOf(':'))), target], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
      if (!answer.endsWith(`@${image.digest}`)) throw new Error(`crane pushed ${target} as ${answer}, not the index written (${image.digest})`);
      log(`pushed ${answer}`);
      pushed.push(answer);
    }
    // helm push reports the pushed reference and digest on stderr.
    const chartAnswer = spawnSync(helm, ['push', written.chart, `oci://${prefix}/charts`], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    if (chartAnswer.status !== 0) throw new Error(`helm push ${written.chart} oci://${prefix}/charts failed: ${chartAnswer.stderr}`);
    const digest = /Digest: (sha256:[0-9a-f]{64})/.exec(`${chartAnswer.stdout}${chartAnswer.stderr}`)?.[1];
    if (!digest) throw new Error(`helm push named no digest: ${chartAnswer.stdout}${chartAnswer.stderr}`);
    log(`pushed oci://${prefix}/charts/${CHART}:${written.info.version}@${digest}`);
    pushed.push(`oci://${prefix}/charts/${CHART}:${written.info.version}@${digest}`);
    return pushed;
  } finally {
    rmSync(config, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const { values } = parseArgs({ options: { version: { type: 'string' }, out: { type: 'string' }, push: { type: 'string' } } });
  if (!values.version) {
    process.stderr.write('usage: node scripts/release.ts --version X.Y.Z [--out DIR] [--push REGISTRY/PREFIX] (make release VERSION=X.Y.Z [PUSH=REGISTRY/PREFIX])\n');
    process.exit(2);
  }
  const start = Date.now();
  const written = await release(values.version, resolve(values.out ?? join(repoRoot, 'release', values.version)));
  const pushed = values.push ? push(written, values.push.replace(/\/+$/, '')) : [];
  process.stdout.write(`${written.dir}\n${pushed.map((line) => `${line}\n`).join('')}`);
  log(`done in ${Math.round((Date.now() - start) / 1000)} s`);
}
