// Builds the container images of the real node as OCI image layout archives, with no registry and
// no Docker: each is one uncompressed layer (a tar of a directory assembled here), its config and
// its manifest, named by the `io.containerd.image.name` annotation that `ctr images import` reads.
// Archives are cached under ~/.cache/sidecar-terminator/images, keyed by a hash of what goes in.
//
//   node scripts/build-images.ts [NAME...]     builds (or finds) the images, prints one
//                                              "REFERENCE<TAB>ARCHIVE" line each; no NAME: all
//
// The images:
//   pause, quick-exit, stop-sidecar,             static Go programs from images/ (stop-sidecar is
//   test-container(-nonroot)                     the watcher's --signal-image)
//   busybox                                      Debian's busybox-static (fetched, not installed)
//   tini                                         Debian's tini-static as the init, with busybox
//   nginx                                        Debian's nginx and the libraries it links
//   otelcol, cloud-sql-proxy                     built by scripts/build-sidecar-programs.sh
//   sidecar-terminator                           the add-on: the Dockerfile's content (Node.js and the
//                                                bundles of scripts/bundle.ts), assembled here, with
//                                                the Dockerfile's ENTRYPOINT (Node's flags included)
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';

const repoRoot = resolve(import.meta.dirname, '..');
const cacheRoot = process.env.SIDECAR_TERMINATOR_CACHE ?? join(process.env.HOME ?? '/root', '.cache/sidecar-terminator');
const imagesDir = join(cacheRoot, 'images');
const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;

/** What an image runs: its OCI config, less what every image shares. */
interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  User?: string;
  Env?: string[];
  WorkingDir?: string;
}

interface ImageSpec {
  /** The fully qualified reference kubelet asks for (`busybox:1.35` is `docker.io/library/busybox:1.35`). */
  reference: string;
  /** Inputs that decide the content: a change rebuilds the archive. */
  inputs(): string[];
  /** Fills the root filesystem directory. */
  assemble(rootfs: string): void;
  config: ImageConfig;
}

const PATH_ENV = 'PATH=/usr/local/bin:/usr/bin:/bin';
/** The project's Node.js 24, from its `node` package (the one `make test` runs). */
const projectNode = join(repoRoot, 'node_modules/node/bin/node');

/** A static Go program from images/, built into a temporary directory once per run. */
const goPrograms = new Map<string, string>();
function goProgram(name: string): string {
  let binary = goPrograms.get(name);
  if (!binary) {
    binary = join(mkdtempSync(join(tmpdir(), 'st-image-go-')), name);
    execFileSync('go', ['build', '-trimpath', '-ldflags', '-s -w', '-o', binary, `./${name}`], {
      cwd: join(repoRoot, 'images'),
      env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    goPrograms.set(name, binary);
  }
  return binary;
}

function goImage(reference: string, program: string, config: ImageConfig): ImageSpec {
  return {
    reference,
    inputs: () => [goVersion(), ...filesUnder(join(repoRoot, 'images'))],
    assemble(rootfs) {
      copyExecutable(goProgram(program), join(rootfs, program));
      mkdirSync(join(rootfs, 'tmp'), { mode: 0o1777 });
      chmodSync(join(rootfs, 'tmp'), 0o1777);
    },
    config: { Env: [PATH_ENV], ...config },
  };
}

const IMAGES: Record<string, ImageSpec> = {
  pause: goImage('sidecar-terminator.local/pause:1', 'pause', { Entrypoint: ['/pause'] }),
  'quick-exit': goImage(`ghcr.io/sidecar-terminator/quick-exit:${version}`, 'quick-exit', { Entrypoint: ['/quick-exit'] }),
  'stop-sidecar': goImage(`ghcr.io/sidecar-terminator/stop-sidecar:${version}`, 'stop-sidecar', { Entrypoint: ['/stop-sidecar'] }),
  'test-container': goImage('sidecar-terminator.local/test-container:1', 'test-container', { Entrypoint: ['/test-container'] }),
  'test-container-nonroot': goImage('sidecar-terminator.local/test-container-nonroot:1', 'test-container', {
    Entrypoint: ['/test-container'],
    User: '1337:1337',
  }),
  busybox: {
    reference: 'docker.io/library/busybox:1.35',
    inputs: () => [debianPackage('busybox-static')],
    assemble: assembleBusybox,
    config: { Env: [PATH_ENV], Cmd: ['sh'] },
  },
  // An init that forwards signals to its child, as images built on tini run: tini-static as /sbin/tini, busybox for the child.
  tini: {
    reference: 'sidecar-terminator.local/tini:1',
    inputs: () => [debianPackage('busybox-static'), debianPackage('tini')],
    assemble(rootfs) {
      assembleBusybox(rootfs);
      withPackage('tini', (unpacked) => copyExecutable(join(unpacked, 'usr/bin/tini-static'), join(rootfs, 'sbin/tini')));
    },
    config: { Env: [PATH_ENV], Entrypoint: ['/sbin/tini', '--'] },
  },
  // Debian's nginx, with the shared libraries it links and a configuration that serves one page on port 8080.
  nginx: {
    reference: 'sidecar-terminator.local/nginx:1',
    inputs: () => [debianPackage('nginx')],
    assemble(rootfs) {
      withPackage('nginx', (unpacked) => copyExecutable(join(unpacked, 'usr/sbin/nginx'), join(rootfs, 'usr/sbin/nginx')));
      for (const library of sharedLibraries(join(rootfs, 'usr/sbin/nginx'))) copyExecutable(library, join(rootfs, library.replace(/^\//, '')));
      for (const dir of ['etc/nginx', 'var/log/nginx', 'var/lib/nginx', 'run', 'tmp', 'usr/share/nginx/html']) mkdirSync(join(rootfs, dir), { recursive: true });
      chmodSync(join(rootfs, 'tmp'), 0o1777);
      writeFileSync(join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/false\nwww-data:x:33:33:www-data:/var/www:/bin/false\n');
      writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nwww-data:x:33:\n');
      writeFileSync(join(rootfs, 'usr/share/nginx/html/index.html'), 'sidecar\n');
      writeFileSync(
        join(rootfs, 'etc/nginx/nginx.conf'),
        'daemon off;\nuser www-data;\nworker_processes 1;\npid /run/nginx.pid;\nerror_log stderr info;\nevents { worker_connections 64; }\n' +
          'http {\n  access_log /dev/stdout;\n  client_body_temp_path /tmp/body;\n  proxy_temp_path /tmp/proxy;\n  fastcgi_temp_path /tmp/fastcgi;\n  uwsgi_temp_path /tmp/uwsgi;\n  scgi_temp_path /tmp/scgi;\n' +
          '  server { listen 8080; root /usr/share/nginx/html; }\n}\n',
      );
    },
    config: { Env: [PATH_ENV], Entrypoint: ['/usr/sbin/nginx'] },
  },
  otelcol: {
    reference: 'sidecar-terminator.local/otelcol:1',
    inputs: () => [join(sidecarPrograms(), 'otelcol')],
    assemble(rootfs) {
      copyExecutable(join(sidecarPrograms(), 'otelcol'), join(rootfs, 'otelcol'));
      mkdirSync(join(rootfs, 'etc/otelcol'), { recursive: true });
      // Traces over OTLP/gRPC on the pod's loopback, written out by the debug exporter.
      writeFileSync(
        join(rootfs, 'etc/otelcol/config.yaml'),
        'receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:4317\nexporters:\n  debug: {}\n' +
          'service:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    traces:\n      receivers: [otlp]\n      exporters: [debug]\n',
      );
      mkdirSync(join(rootfs, 'tmp'), { mode: 0o1777 });
    },
    config: { Env: [PATH_ENV], Entrypoint: ['/otelcol'], Cmd: ['--config=/etc/otelcol/config.yaml'] },
  },
  'cloud-sql-proxy': {
    reference: 'sidecar-terminator.local/cloud-sql-proxy:1',
    inputs: () => [join(sidecarPrograms(), 'cloud-sql-proxy')],
    assemble(rootfs) {
      copyExecutable(join(sidecarPrograms(), 'cloud-sql-proxy'), join(rootfs, 'cloud-sql-proxy'));
      mkdirSync(join(rootfs, 'tmp'), { mode: 0o1777 });
    },
    config: { Env: [PATH_ENV], Entrypoint: ['/cloud-sql-proxy'] },
  },
  'sidecar-terminator': {
    reference: `ghcr.io/sidecar-terminator/sidecar-terminator:${version}`,
    inputs: () => [
      projectNode,
      ...['package.json', 'package-lock.json', 'Dockerfile', 'scripts/bundle.ts'].map((file) => join(repoRoot, file)),
      ...filesUnder(join(repoRoot, 'src')),
    ],
    assemble: assembleAddOn,
    // As the Dockerfile: the node image's unprivileged user, by number so that runAsNonRoot can verify it.
    config: {
      Env: [PATH_ENV, 'NODE_ENV=production'],
      WorkingDir: '/app',
      User: '1000:1000',
      Entrypoint: addOnEntrypoint(),
      Cmd: ['serve'],
    },
  },
};

/**
 * The add-on image's ENTRYPOINT as the Dockerfile has it: `node`, Node's flags, the bundled CLI.
 * One home for those flags: this image, the benchmarks and the tests that start the image's
 * content read them here.
 */
export function addOnEntrypoint(): string[] {
  const line = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'))?.[1];
  if (!line) throw new Error('the Dockerfile has no ENTRYPOINT ["node", ...] line');
  return JSON.parse(line) as string[];
}

/** Node's flags of the image's ENTRYPOINT (between `node` and the script). */
export function addOnNodeFlags(): string[] {
  return addOnEntrypoint().slice(1, -1);
}

/** The Dockerfile's two stages without Docker: the bundles, then Node.js and its libraries. */
function assembleAddOn(rootfs: string): void {
  const app = join(rootfs, 'app');
  mkdirSync(app, { recursive: true });
  // 1. The bundles, from the repository's dependency tree (stderr: stdout carries this script's answer).
  execFileSync(projectNode, [join(repoRoot, 'scripts/bundle.ts'), '--out', join(app, 'dist')], { cwd: repoRoot, stdio: ['ignore', 2, 2] });
  copyFileSync(join(repoRoot, 'package.json'), join(app, 'package.json'));
  // 2. The runtime: this Node.js (the project's own, from its `node` package) and the shared
  // libraries it links, at the paths its ELF header names.
  copyExecutable(projectNode, join(rootfs, 'usr/local/bin/node'));
  for (const library of sharedLibraries(projectNode)) copyExecutable(library, join(rootfs, library.replace(/^\//, '')));
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  writeFileSync(join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/false\nnode:x:1000:1000::/app:/bin/false\n');
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnode:x:1000:\n');
}

/** Debian's busybox-static, with every applet as a link, as the busybox image has them. */
function assembleBusybox(rootfs: string): void {
  withPackage('busybox-static', (unpacked) => copyExecutable(join(unpacked, 'bin/busybox'), join(rootfs, 'bin/busybox')));
  const applets = execFileSync(join(rootfs, 'bin/busybox'), ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const applet of applets) if (applet !== 'busybox') execFileSync('ln', ['-s', 'busybox', join(rootfs, 'bin', applet)]);
  for (const dir of ['tmp', 'etc', 'root']) mkdirSync(join(rootfs, dir), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
  writeFileSync(join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n');
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnobody:x:65534:\n');
}

/** Runs `use` on a Debian package unpacked into a temporary directory. */
function withPackage(name: string, use: (unpacked: string) => void): void {
  const unpacked = mkdtempSync(join(tmpdir(), `st-${name}-`));
  try {
    execFileSync('dpkg-deb', ['-x', debianPackage(name), unpacked]);
    use(unpacked);
  } finally {
    rmSync(unpacked, { recursive: true, force: true });
  }
}

/** The bin directory of scripts/build-sidecar-programs.sh (it builds once, then finds its cache). */
let sidecarProgramsDir: string | undefined;
function sidecarPrograms(): string {
  sidecarProgramsDir ??= execFileSync('bash', [join(repoRoot, 'scripts/build-sidecar-programs.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').pop()!;
  return sidecarProgramsDir;
}

/** The libraries `ldd` resolves for a binary, and its loader. */
function sharedLibraries(binary: string): string[] {
  const output = execFileSync('ldd', [binary], { encoding: 'utf8' });
  const paths = [...output.matchAll(/(\/\S+\.so[^\s]*)/g)].map((match) => match[1]!);
  return [...new Set(paths)];
}

function copyExecutable(from: string, to: string): void {
  mkdirSync(dirname(to), { recursive: true });
  copyFileSync(from, to);
  chmodSync(to, 0o755);
}

/** A Debian package's archive, fetched once into the cache with `apt-get download`. */
function debianPackage(name: string): string {
  const dir = join(cacheRoot, 'debs');
  mkdirSync(dir, { recursive: true });
  const find = () => readdirSync(dir).find((file) => file.startsWith(`${name}_`) && file.endsWith('.deb'));
  if (!find()) {
    try {
      execFileSync('apt-get', ['download', name], { cwd: dir, stdio: ['ignore', 'ignore', 'ignore'] });
    } catch {
      // The package lists may be missing on a fresh machine.
      execFileSync('apt-get', ['update', '-q'], { stdio: ['ignore', 'ignore', 'inherit'] });
      execFileSync('apt-get', ['download', name], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    }
  }
  const file = find();
  if (!file) throw new Error(`apt-get download ${name} left no ${name}_*.deb in ${dir}`);
  return join(dir, file);
}

function goVersion(): string {
  return execFileSync('go', ['version'], { encoding: 'utf8' }).trim();
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/**
 * A hash of the inputs: file paths hash their content, other strings themselves. Paths inside the
 * repository count relative to it, so two checkouts of the same tree share their archives.
 */
function inputsHash(spec: ImageSpec): string {
  const hash = createHash('sha256').update(spec.reference).update(JSON.stringify(spec.config));
  for (const input of spec.inputs()) {
    hash.update(input.startsWith(`${repoRoot}/`) ? relative(repoRoot, input) : input);
    if (input.startsWith('/') && existsSync(input) && statSync(input).isFile()) hash.update(readFileSync(input));
  }
  return hash.digest('hex').slice(0, 16);
}

function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** Writes the OCI image layout of one image into `layout` (a directory), then archives it. */
function writeArchive(spec: ImageSpec, archive: string): void {
  const work = mkdtempSync(join(tmpdir(), 'st-image-'));
  try {
    const rootfs = join(work, 'rootfs');
    mkdirSync(rootfs);
    spec.assemble(rootfs);
    const layerTar = join(work, 'layer.tar');
    // Reproducible: sorted names, root ownership, a fixed time.
    execFileSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '-cf', layerTar, '-C', rootfs, '.']);
    const layer = readFileSync(layerTar);
    const layout = join(work, 'layout');
    const blobs = join(layout, 'blobs/sha256');
    mkdirSync(blobs, { recursive: true });
    const blob = (data: Buffer) => {
      const digest = sha256(data);
      writeFileSync(join(blobs, digest.slice('sha256:'.length)), data);
      return { digest, size: data.length };
    };
    const layerBlob = blob(layer);
    const config = Buffer.from(
      JSON.stringify({
        architecture: 'amd64',
        os: 'linux',
        config: spec.config,
        rootfs: { type: 'layers', diff_ids: [layerBlob.digest] },
        history: [{ created_by: 'scripts/build-images.ts' }],
      }),
    );
    const configBlob = blob(config);
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...configBlob },
        layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', ...layerBlob }],
      }),
    );
    const manifestBlob = blob(manifest);
    const tag = spec.reference.slice(spec.reference.lastIndexOf(':') + 1);
    writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    writeFileSync(
      join(layout, 'index.json'),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.index.v1+json',
        manifests: [
          {
            mediaType: 'application/vnd.oci.image.manifest.v1+json',
            ...manifestBlob,
            platform: { architecture: 'amd64', os: 'linux' },
            annotations: { 'io.containerd.image.name': spec.reference, 'org.opencontainers.image.ref.name': tag },
          },
        ],
      }),
    );
    // Test files may build the same image at once: each writes its own file, the last rename wins.
    const partial = `${archive}.${process.pid}.partial`;
    execFileSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '-cf', partial, '-C', layout, '.']);
    renameSync(partial, archive);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The archive of one image, built unless its inputs are unchanged since it was last built. */
export function buildImage(name: string): { reference: string; archive: string } {
  const spec = IMAGES[name];
  if (!spec) throw new Error(`no image "${name}": the images are ${Object.keys(IMAGES).join(', ')}`);
  mkdirSync(imagesDir, { recursive: true });
  const archive = join(imagesDir, `${name}-${inputsHash(spec)}.tar`);
  if (existsSync(archive)) {
    // Marks it as in use, so that another checkout's build below does not remove it.
    const now = new Date();
    utimesSync(archive, now, now);
  } else {
    process.stderr.write(`[images] building ${spec.reference}\n`);
    // Older archives of this image go once unused for a day: another checkout of a different
    // tree may be using its own archive right now.
    const staleBefore = Date.now() - 24 * 60 * 60 * 1000;
    for (const old of readdirSync(imagesDir)) {
      if (!old.startsWith(`${name}-`) || !/^[0-9a-f]{16}\.tar$/.test(old.slice(name.length + 1))) continue;
      if (statSync(join(imagesDir, old)).mtimeMs < staleBefore) rmSync(join(imagesDir, old), { force: true });
    }
    writeArchive(spec, archive);
  }
  return { reference: spec.reference, archive };
}

if (import.meta.main) {
  const names = process.argv.slice(2);
  for (const name of names.length > 0 ? names : Object.keys(IMAGES)) {
    const { reference, archive } = buildImage(name);
    process.stdout.write(`${reference}\t${archive}\n`);
  }
}
