// A release as a user meets it: `make release PUSH=` pushes the images and the chart to a real
// OCI registry (CNCF Distribution, on loopback, with TLS from its own CA and basic
// authentication); a real node's containerd pulls from it (a hosts.toml with that CA, the
// credentials from an imagePullSecret): nothing of the release is imported by hand. The install
// commands of docs/installation.md run as written, the registry's name aside (the page's
// registry.example.com is this registry); the README's install command is the page's. Then an
// example Job completes, the kubectl plugin is installed with krew from the release's manifest and
// archive and runs with no Node.js on the PATH, and `helm uninstall` leaves what the page says.
// arm64 cannot run here: its index entries, image configurations and binaries' headers are checked.
// Each image's SBOM is validated against the CycloneDX 1.6 schema by the CycloneDX library.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { AppsV1Api } from '@kubernetes/client-node';
import { Spec, Validation } from '@cyclonedx/cyclonedx-library';
import { helmBinary } from '../chart/helm.ts';
import { ENV_WHEN_JOB_EXIT } from '../../src/policy/index.ts';
import { runCommand } from '../support/command.ts';
import { apiFeatures, kubernetesVersion } from '../support/control-plane.ts';
import { expectJobStoppedBy } from '../support/endings.ts';
import { buildScriptOutput } from '../support/managed-process.ts';
import { commandBlocks, readDoc, section } from '../support/markdown.ts';
import { repoRoot } from '../support/repo.ts';
import { jobYaml } from '../support/pods.ts';
import { canRunRealNode } from '../support/real-node.ts';
import { assertAdmittedThroughService, startRealCluster } from '../support/real-stack.ts';
import { startRegistry } from '../support/registry.ts';
import { podOfJob, waitForJob } from '../support/stack.ts';
import { waitFor } from '../support/wait.ts';

const PAGE = 'docs/installation.md';
/** The registry the page's commands name, which the test's registry stands for. */
const PAGE_REGISTRY = 'registry.example.com';
const NS = 'sidecar-terminator';
const JOBS_NS = 'batch-jobs';
const ARCH = process.arch === 'arm64' ? 'arm64' : 'amd64';

const page = readDoc(PAGE);
const publicInstall = commandBlocks(section(page, 'Install with Helm'))[0]?.commands.body ?? '';
const [install = '', jobsNamespace = ''] = commandBlocks(section(page, 'From a private registry or a mirror')).map((block) => block.commands.body);
const version = /--version (\S+)/.exec(install)?.[1] ?? '';
const PLUGIN_PAGE = 'docs/status-plugin.md';
const krewInstall = commandBlocks(readDoc(PLUGIN_PAGE)).map((block) => block.commands.body).find((body) => body.startsWith('kubectl krew install')) ?? '';
/** A Job's containers: a main one that runs for `seconds`, and a sidecar that runs until SIGTERM. */
const jobContainers = (seconds: number) => [
  { name: 'report', image: 'busybox:1.35', command: ['sleep', String(seconds)] },
  { name: 'log-shipper', image: 'busybox:1.35', command: ['sh', '-c', "trap 'exit 0' TERM; sleep 3600 & wait"], env: [{ name: ENV_WHEN_JOB_EXIT, value: 'true' }] },
];
/** A Job whose main container runs for an hour. */
const LONG_JOB = jobYaml('long-report', { containers: jobContainers(3600) });

const k8s = await kubernetesVersion();
if (!apiFeatures(k8s).validatingAdmissionPolicy) t.plan(0, `Kubernetes ${k8s.gitVersion} is older than the chart's kubeVersion (>=1.30)`);
else if (canRunRealNode(t)) {
  t.test('the install commands: the README\'s is the page\'s, the private registry\'s names the same version', async (t) => {
    t.ok(install.includes('helm install') && jobsNamespace.includes('imagePullSecrets') && version, `${PAGE} has the private-registry install block (with --version) and the Jobs' namespace block`);
    t.ok(readDoc('README.md').includes(publicInstall), `the README's install command is ${PAGE}'s, word for word`);
    t.equal(/--version (\S+)/.exec(publicInstall)?.[1], version, 'both install commands name the same version');
  });
  const registry = await startRegistry();
  t.teardown(() => registry.stop());
  const prefix = `${registry.host}/sidecar-terminator`;
  const work = mkdtempSync(join(tmpdir(), 'st-release-e2e-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const out = join(work, 'release');
  // The machine that releases, and the user's: both trust the registry's CA and know its credentials.
  const credentials = { SSL_CERT_FILE: registry.caFile, REGISTRY_USERNAME: registry.username, REGISTRY_PASSWORD: registry.password };

  const makeRelease = (releaseVersion: string, dir: string) =>
    runCommand('make', ['release', `VERSION=${releaseVersion}`, `OUT=${dir}`, `PUSH=${prefix}`], { cwd: repoRoot, env: { ...process.env, ...credentials } });
  const [released, cluster, helm, crane, krew] = await Promise.all([
    makeRelease(version, out),
    // The node pulls every add-on image from the registry, as a cluster installing the release does.
    startRealCluster(t, { reachableFromPods: true, node: { images: ['busybox'], podImages: false, registries: [{ host: registry.host, caFile: registry.caFile }] } }),
    helmBinary(),
    buildScriptOutput('build-go-tool.sh', ['crane']),
    buildScriptOutput('build-go-tool.sh', ['krew']),
  ]);
  const { cp, node } = cluster;
  t.equal(released.code, 0, `make release VERSION=${version} PUSH=${prefix}${released.code === 0 ? '' : `: ${released.stderr.slice(-2000)}`}`);
  t.comment(released.stderr.split('\n').filter((line) => /kubectl plugin|to pull|done in|pushed oci/.test(line)).join('\n'));
  // The next release, for the upgrade below: made while the first is checked and installed.
  const next = version.replace(/\d+$/, (patch) => String(Number(patch) + 1));
  const nextReleased = makeRelease(next, join(work, 'next'));

  const craneEnv = { ...process.env, SSL_CERT_FILE: registry.caFile, DOCKER_CONFIG: join(work, 'crane') };
  mkdirSync(craneEnv.DOCKER_CONFIG, { recursive: true });
  execFileSync(crane, ['auth', 'login', registry.host, '--username', registry.username, '--password-stdin'], { env: craneEnv, input: registry.password, stdio: ['pipe', 'ignore', 'pipe'] });
  const craneJson = (args: string[]) => JSON.parse(execFileSync(crane, args, { env: craneEnv, encoding: 'utf8' })) as Record<string, unknown>;
  const imagesTxt = readFileSync(join(out, 'images.txt'), 'utf8').trim().split('\n');

  t.test('the registry serves each image as a multi-architecture index, and arm64 holds arm64 binaries', async (t) => {
    const images = imagesTxt.filter((line) => !line.startsWith('oci://'));
    t.same(images.map((line) => line.slice(0, line.indexOf(':'))).sort(), ['quick-exit', 'sidecar-terminator', 'sidecar-terminator-runtime', 'stop-sidecar'].map((name) => `ghcr.io/sidecar-terminator/${name}`), 'images.txt lists the published images');
    for (const line of images) {
      const [reference, digest] = line.replace('ghcr.io/sidecar-terminator', prefix).split('@') as [string, string];
      const index = craneJson(['manifest', reference]) as { mediaType: string; manifests: { platform: { os: string; architecture: string } }[]; annotations?: Record<string, string> };
      t.equal(execFileSync(crane, ['digest', reference], { env: craneEnv, encoding: 'utf8' }).trim(), digest, `${reference} is the digest images.txt names`);
      t.equal(index.mediaType, 'application/vnd.oci.image.index.v1+json', `${reference} is an OCI image index`);
      t.same(index.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`).sort(), ['linux/amd64', 'linux/arm64'], `${reference}: linux/amd64 and linux/arm64`);
      t.match(index.annotations, { 'org.opencontainers.image.version': version, 'org.opencontainers.image.licenses': String, 'org.opencontainers.image.revision': /^[0-9a-f]{40}$/, 'org.opencontainers.image.created': String, 'org.opencontainers.image.source': String }, `${reference}: the OCI annotations`);
      const config = craneJson(['config', '--platform', 'linux/arm64', reference]) as { architecture: string; config: { User?: string } };
      t.equal(config.architecture, 'arm64', `${reference}: the linux/arm64 entry's configuration says arm64`);
    }
    // What the arm64 images run, by their ELF headers (e_machine 183: AArch64).
    const addOn = `${prefix}/sidecar-terminator:${version}`;
    t.equal(elfMachine(exportFile(crane, craneEnv, addOn, 'linux/arm64', /(^|\/)bin\/node$/, work)), 183, 'the arm64 add-on image runs an AArch64 node');
    for (const program of ['quick-exit', 'stop-sidecar']) {
      t.equal(elfMachine(exportFile(crane, craneEnv, `${prefix}/${program}:${version}`, 'linux/arm64', new RegExp(`^(\\./)?${program}$`), work)), 183, `the arm64 ${program} image runs an AArch64 program`);
    }
    t.equal(elfMachine(exportFile(crane, craneEnv, addOn, 'linux/amd64', /(^|\/)bin\/node$/, work)), 62, 'and the amd64 one an x86-64 node');
    t.equal((craneJson(['config', '--platform', 'linux/amd64', addOn]) as { config: { User?: string } }).config.User, '1000:1000', 'the add-on runs as a non-root user');
    for (const platform of ['linux/amd64', 'linux/arm64']) {
      const manifest = craneJson(['manifest', '--platform', platform, addOn]) as { annotations?: Record<string, string> };
      const base = execFileSync(crane, ['digest', '--platform', platform, `${prefix}/sidecar-terminator-runtime:${version}`], { env: craneEnv, encoding: 'utf8' }).trim();
      t.equal(manifest.annotations?.['org.opencontainers.image.base.digest'], base, `${platform}: the add-on names its base, the runtime image for ${platform}, by digest`);
    }
  });

  t.test('the release directory: checksums, plugin archives per platform, a krew manifest that matches them', async (t) => {
    const check = await runCommand('sha256sum', ['-c', '--quiet', 'SHA256SUMS'], { cwd: out });
    t.equal(check.code, 0, `sha256sum -c SHA256SUMS${check.code === 0 ? '' : `: ${check.stdout}${check.stderr}`}`);
    const manifest = readFileSync(join(out, 'sidecar-terminator.yaml'), 'utf8');
    for (const [os, arch, header] of [['linux', 'amd64', 62], ['linux', 'arm64', 183], ['windows', 'amd64', 'PE']] as const) {
      const archive = `kubectl-sidecar_terminator-${version}-${os}-${arch}.tar.gz`;
      const sum = execFileSync('sha256sum', [join(out, archive)], { encoding: 'utf8' }).split(' ')[0]!;
      t.match(manifest, new RegExp(`os: ${os}\\n\\s+arch: ${arch}\\n\\s+uri: \\S+/${archive}\\n\\s+sha256: ${sum}`), `the krew manifest names ${archive} with its checksum`);
      const dir = join(work, `${os}-${arch}`);
      mkdirSync(dir);
      execFileSync('tar', ['-xzf', join(out, archive), '-C', dir]);
      const binary = join(dir, os === 'windows' ? 'kubectl-sidecar_terminator.exe' : 'kubectl-sidecar_terminator');
      if (header === 'PE') t.equal(peMachine(binary), 0x8664, `${archive}: a Windows x86-64 executable`);
      else t.equal(elfMachine(binary), header, `${archive}: an ELF executable for ${arch}`);
    }
  });

  t.test('the SBOMs: valid CycloneDX 1.6, one per image and architecture, naming what each image holds', async (t) => {
    const validator = new Validation.JsonStrictValidator(Spec.Version.v1dot6);
    const expected: Record<string, RegExp[]> = {
      'sidecar-terminator': [/^pkg:npm\/sidecar-terminator@/, /^pkg:npm\/node-linux-/, /^pkg:npm\/fastify@/, /^pkg:npm\/%40kubernetes\/client-node@/, /^pkg:deb\/debian\//],
      'sidecar-terminator-runtime': [/^pkg:npm\/node-linux-/, /^pkg:deb\/debian\//],
      'quick-exit': [/^pkg:golang\//],
      'stop-sidecar': [/^pkg:golang\//],
    };
    for (const [image, holds] of Object.entries(expected)) {
      for (const arch of ['amd64', 'arm64']) {
        const file = join(out, 'sbom', `${image}-linux-${arch}.cdx.json`);
        const text = readFileSync(file, 'utf8');
        t.equal(await validator.validate(text), null, `${image} linux/${arch}: valid against the CycloneDX 1.6 schema`);
        const purls = ((JSON.parse(text) as { components?: { purl?: string }[] }).components ?? []).map((component) => component.purl ?? '');
        for (const purl of holds) t.ok(purls.some((each) => purl.test(each)), `${image} linux/${arch}: names a component ${purl}`);
      }
    }
  });

  const deployments = cp.kubeConfig.makeApiClient(AppsV1Api);
  const userPath = `${join(helm, '..')}:${cp.binDir}:/usr/bin:/bin`;
  const helmHome = join(work, 'helm');
  const userEnv = {
    ...process.env,
    ...credentials,
    PATH: userPath,
    KUBECONFIG: cp.kubeconfigPath,
    HELM_CONFIG_HOME: join(helmHome, 'config'),
    HELM_CACHE_HOME: join(helmHome, 'cache'),
    HELM_DATA_HOME: join(helmHome, 'data'),
  };
  const asWritten = (block: string) => runCommand('bash', ['-euo', 'pipefail', '-c', block.replaceAll(PAGE_REGISTRY, registry.host)], { env: userEnv, cwd: work });
  const addOnImage = `${prefix}/sidecar-terminator:${version}`;

  t.test("the page's install commands, against the registry: the add-on's images are pulled by the node and start", async (t) => {
    const before = await node.crictl(['images', '-q']);
    t.notMatch(await node.crictl(['images']), registry.host, 'nothing of the release is on the node before the install');
    t.ok(before.length > 0, 'the node lists its images');
    const started = Date.now();
    const installed = await asWritten(install);
    t.equal(installed.code, 0, `the install commands run${installed.code === 0 ? '' : `: ${installed.stderr}`}`);
    const rolled = await cp.kubectl(['rollout', 'status', 'deployment', '--timeout', '300s'], { namespace: NS });
    if (rolled.code !== 0) t.comment((await cp.kubectl(['get', 'pods,events', '-o', 'wide'], { namespace: NS })).stdout);
    t.equal(rolled.code, 0, `both Deployments roll out${rolled.code === 0 ? '' : `: ${rolled.stderr}`}`);
    t.comment(`from helm install to both Deployments ready (the image pulled from the registry): ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await assertAdmittedThroughService(t, cp, await cp.createNamespace());
    for (const component of ['webhook', 'watcher']) {
      const spec = (await deployments.readNamespacedDeployment({ name: `sidecar-terminator-${component}`, namespace: NS })).spec?.template.spec;
      t.equal(spec?.containers[0]?.image, addOnImage, `${component} runs the release's image from the registry`);
      t.same(spec?.imagePullSecrets, [{ name: 'registry-credentials' }], `${component} pulls with the page's Secret`);
    }
    t.match(await node.crictl(['images']), `${prefix}/sidecar-terminator`, "the node's containerd holds the image it pulled");
    const pulls = registry.requests().filter((request) => request.method === 'GET' && request.path.includes('/sidecar-terminator/sidecar-terminator/') && request.userAgent.includes('containerd'));
    t.ok(pulls.some((request) => request.path.includes('/manifests/')), `containerd fetched the manifests from the registry (${pulls.length} requests)`);
    t.ok(pulls.some((request) => request.path.includes('/blobs/')), 'and the layers');
  });

  t.test("an example Job completes in a namespace set up as the page says, its stop-sidecar container pulled with that namespace's Secret", async (t) => {
    await cp.createNamespace(JOBS_NS);
    const prepared = await asWritten(jobsNamespace);
    t.equal(prepared.code, 0, `the Jobs' namespace commands run${prepared.code === 0 ? '' : `: ${prepared.stderr}`}`);
    const applied = await cp.kubectl(['apply', '-f', join(repoRoot, 'examples/log-shipper.yaml')], { namespace: JOBS_NS });
    t.equal(applied.code, 0, `kubectl apply -f examples/log-shipper.yaml${applied.code === 0 ? '' : `: ${applied.stderr}`}`);
    await waitForJob(cluster, JOBS_NS, 'log-shipper', 'Complete', 240_000);
    const pod = await podOfJob(cluster, JOBS_NS, 'log-shipper');
    t.same(pod.spec?.imagePullSecrets, [{ name: 'registry-credentials' }], "the ServiceAccount gave the pod the namespace's Secret");
    const signal = pod.status?.ephemeralContainerStatuses?.[0];
    t.equal(pod.spec?.ephemeralContainers?.[0]?.image, `${prefix}/stop-sidecar:${version}`, "the signal container runs the release's stop-sidecar");
    t.match(signal?.imageID, new RegExp(`^${prefix}/stop-sidecar@sha256:`), 'pulled from the registry');
    // The chart's kill mechanism, auto, is signal here (no OpenKruise): its signal container stopped the shipper.
    await expectJobStoppedBy(t, cluster, JOBS_NS, 'log-shipper', { 'log-shipper': 'signal' });
  });

  t.test(`helm upgrade to the next release (${next}) with Jobs in flight leaves none hanging`, async (t) => {
    const made = await nextReleased;
    t.equal(made.code, 0, `make release VERSION=${next} PUSH=${prefix}${made.code === 0 ? '' : `: ${made.stderr.slice(-2000)}`}`);
    const jobs = ['in-flight-1', 'in-flight-2', 'in-flight-3'];
    for (const name of jobs) {
      const applied = await cp.kubectl(['apply', '-f', '-'], { namespace: JOBS_NS, input: jobYaml(name, { containers: jobContainers(20) }) });
      t.equal(applied.code, 0, `kubectl apply of Job ${name}${applied.code === 0 ? '' : `: ${applied.stderr}`}`);
    }
    await waitFor('the in-flight Jobs\' pods to run', async () => {
      const phases = await Promise.all(jobs.map(async (name) => (await podOfJob(cluster, JOBS_NS, name)).status?.phase));
      return phases.every((phase) => phase === 'Running');
    }, { timeoutMs: 120_000 });
    const upgraded = await runCommand(helm, ['upgrade', 'sidecar-terminator', `oci://${prefix}/charts/sidecar-terminator`, '--version', next, '--namespace', NS, '--reuse-values', '--wait', '--timeout', '300s'], { env: userEnv });
    t.equal(upgraded.code, 0, `helm upgrade --version ${next} --reuse-values${upgraded.code === 0 ? '' : `: ${upgraded.stderr}`}`);
    for (const component of ['webhook', 'watcher']) {
      const spec = (await deployments.readNamespacedDeployment({ name: `sidecar-terminator-${component}`, namespace: NS })).spec?.template.spec;
      t.equal(spec?.containers[0]?.image, `${prefix}/sidecar-terminator:${next}`, `${component} runs ${next}`);
    }
    for (const name of jobs) {
      await waitForJob(cluster, JOBS_NS, name, 'Complete', 240_000);
      t.pass(`Job ${name}, in flight during the upgrade, completes`);
      await expectJobStoppedBy(t, cluster, JOBS_NS, name, { 'log-shipper': 'signal' });
    }
  });

  t.test("the kubectl plugin, installed with krew as the status page says, runs without Node.js", async (t) => {
    // A Job in flight for the plugin to show: its main container runs for an hour.
    const applied = await cp.kubectl(['apply', '-f', '-'], { namespace: JOBS_NS, input: LONG_JOB });
    t.equal(applied.code, 0, `kubectl apply of a long Job${applied.code === 0 ? '' : `: ${applied.stderr}`}`);
    await waitFor('the long Job\'s pod to run', async () => (await podOfJob(cluster, JOBS_NS, 'long-report')).status?.phase === 'Running', { timeoutMs: 120_000 });
    // `kubectl krew` is krew on the PATH as a kubectl plugin, as krew installs itself.
    const tools = join(work, 'tools');
    mkdirSync(tools);
    symlinkSync(krew, join(tools, 'kubectl-krew'));
    const krewRoot = join(work, 'krew');
    const path = `${join(krewRoot, 'bin')}:${tools}:${cp.binDir}`;
    t.notOk(path.split(':').some((dir) => existsSync(join(dir, 'node'))), `no node on the PATH (${path})`);
    const env = { PATH: path, KREW_ROOT: krewRoot, KUBECONFIG: cp.kubeconfigPath, HOME: work };
    const line = krewInstall.replace(/-linux-amd64\.tar\.gz/, `-linux-${ARCH}.tar.gz`);
    t.match(line, `--archive=kubectl-sidecar_terminator-${version}-linux-`, `${PLUGIN_PAGE} names the release's archive`);
    const installed = await runCommand(join(cp.binDir, 'kubectl'), line.trim().split(/\s+/).slice(1), { env, cwd: out });
    t.equal(installed.code, 0, `${line.trim()}${installed.code === 0 ? '' : `: ${installed.stderr}`}`);
    const status = await runCommand(join(cp.binDir, 'kubectl'), ['sidecar-terminator', 'status', '-A'], { env });
    t.equal(status.code, 0, `kubectl sidecar-terminator status -A${status.code === 0 ? '' : `: ${status.stderr}`}`);
    t.match(status.stdout, new RegExp(`^${JOBS_NS}\\s+long-report-\\w+\\s+long-report\\s+normal\\s+\\S+\\s+waiting for main`, 'm'), status.stdout);
    await cp.kubectl(['delete', 'job', 'long-report', '--cascade=foreground', '--wait=false'], { namespace: JOBS_NS });
  });

  t.test('helm uninstall leaves what the page says, and the Secret the user made', async (t) => {
    const uninstalled = await runCommand(helm, ['uninstall', 'sidecar-terminator', '--namespace', NS, '--wait', '--timeout', '180s'], { env: userEnv });
    t.equal(uninstalled.code, 0, `helm uninstall${uninstalled.code === 0 ? '' : `: ${uninstalled.stderr}`}`);
    await waitFor('the release\'s pods to go', async () => (await cp.kubectl(['get', 'pods', '-o', 'name'], { namespace: NS })).stdout.trim() === '', { timeoutMs: 120_000 });
    const left = await cp.kubectl(['get', 'all,secrets,configmaps,serviceaccounts,roles,rolebindings,leases', '-o', 'name'], { namespace: NS });
    const leftovers = left.stdout.split('\n').filter((name) => name && name !== 'configmap/kube-root-ca.crt' && name !== 'serviceaccount/default');
    // What the page says stays (the add-on made it), and the Secret the install commands made.
    const uninstalling = page.slice(page.indexOf('**Uninstalling.**'), page.indexOf('\n\n', page.indexOf('**Uninstalling.**')));
    const stays = [...uninstalling.matchAll(/the (Secret|Lease)\s+`<release>(-[\w-]+)`/g)].map(([, kind, suffix]) => `${kind === 'Lease' ? 'lease.coordination.k8s.io' : 'secret'}/sidecar-terminator${suffix}`);
    t.same(stays.sort(), ['lease.coordination.k8s.io/sidecar-terminator-watcher', 'secret/sidecar-terminator-tls'], 'the page names what stays');
    t.same(leftovers.sort(), [...stays, 'secret/registry-credentials'].sort(), `left in ${NS}: ${leftovers.join(', ')}`);
    const clusterWide = await cp.kubectl(['get', 'mutatingwebhookconfigurations,validatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,clusterroles,clusterrolebindings', '-o', 'name']);
    t.same(clusterWide.stdout.split('\n').filter((name) => name.includes('sidecar-terminator')), [], 'nothing of the release cluster-wide');
  });
}

/** A file of an image for one platform, through `crane export` (the flattened filesystem), written into `dir`. */
function exportFile(crane: string, env: NodeJS.ProcessEnv, reference: string, platform: string, name: RegExp, dir: string): string {
  const tar = join(dir, `export-${platform.replace('/', '-')}-${Math.random().toString(16).slice(2, 8)}.tar`);
  execFileSync(crane, ['export', '--platform', platform, reference, tar], { env });
  const member = execFileSync('tar', ['-tf', tar], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }).split('\n').find((entry) => name.test(entry));
  if (!member) throw new Error(`${reference} (${platform}) holds no file matching ${name}`);
  const target = `${tar}.d`;
  mkdirSync(target);
  execFileSync('tar', ['-xf', tar, '-C', target, member]);
  rmSync(tar);
  return join(target, member);
}

function header(path: string, length: number, position = 0): Buffer {
  const fd = openSync(path, 'r');
  try {
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, position);
    return buffer;
  } finally {
    closeSync(fd);
  }
}

/** An ELF file's e_machine (62 x86-64, 183 AArch64); -1 when it is no ELF file. */
function elfMachine(path: string): number {
  const head = header(path, 20);
  return head.subarray(0, 4).equals(Buffer.from('\x7fELF', 'latin1')) ? head.readUInt16LE(18) : -1;
}

/** A PE file's machine (0x8664 x86-64); -1 when it is no PE file. */
function peMachine(path: string): number {
  const offset = header(path, 64).readUInt32LE(0x3c);
  const pe = header(path, 6, offset);
  return pe.subarray(0, 4).equals(Buffer.from('PE\0\0', 'latin1')) ? pe.readUInt16LE(4) : -1;
}
