// docs/sidecars.md holds to the code: its table of stop methods is the policy's, each recipe's
// YAML passes `sidecar-terminator lint` with no finding and marks its sidecar as the page says,
// and the error it quotes is the one the webhook and lint give.
import t from 'tap';
import { lintText } from '../../src/lint.ts';
import { KNOWN_PROXIES, classifyContainers, formatFinding, inspectObject, podSpecOf, podAnnotationsOf, type PodSpec } from '../../src/policy/index.ts';
import { parse } from 'yaml';
import { fences, headings, readDoc, section, tableRows } from '../support/markdown.ts';

const page = readDoc('docs/sidecars.md');
const LINT = { enforcement: 'deny', quickExitImageAllowlist: [], nativeSidecars: 'none' } as const;

t.test('the stop methods table names every known proxy with its endpoint', async (t) => {
  const rows = tableRows(section(page, 'Stop methods'));
  for (const [name, known] of Object.entries(KNOWN_PROXIES)) {
    const row = rows.find((r) => r.value === `\`${name}\``);
    t.ok(row, `${name} has a row`);
    t.match(row?.['what is sent'], `\`${known.method} http://localhost:${known.port}${known.path}\``, `${name}: its endpoint`);
  }
});

t.test('every recipe passes lint with no finding, and stops the sidecar it is about', async (t) => {
  const recipes = headings(section(page, 'Recipes')).filter((heading) => heading.level === 3).map((heading) => heading.title);
  t.same(recipes, ['Istio', 'Linkerd', 'Cloud SQL Auth Proxy', 'OpenTelemetry Collector', 'A log shipper']);
  const expected: Record<string, { sidecar: string; stop: string; injected: boolean }> = {
    Istio: { sidecar: 'istio-proxy', stop: 'http://localhost:15020/quitquitquit', injected: true },
    Linkerd: { sidecar: 'linkerd-proxy', stop: 'http://localhost:4191/shutdown', injected: true },
    'Cloud SQL Auth Proxy': { sidecar: 'cloud-sql-proxy', stop: 'http://localhost:9091/quitquitquit', injected: false },
    'OpenTelemetry Collector': { sidecar: 'otel-collector', stop: 'signal', injected: false },
    'A log shipper': { sidecar: 'fluent-bit', stop: 'signal', injected: false },
  };
  for (const recipe of recipes) {
    const yaml = fences(section(page, recipe)).filter((fence) => fence.language === 'yaml');
    t.equal(yaml.length, 1, `${recipe}: one manifest`);
    const report = lintText(yaml[0]!.body, `${recipe}.yaml`, LINT);
    t.same({ checked: report.checked, findings: report.findings.map((f) => f.message) }, { checked: 1, findings: [] }, `${recipe}: lint finds nothing`);

    // The sidecar as the pod will have it: an injected one is added by its webhook.
    const job: unknown = parse(yaml[0]!.body);
    const location = podSpecOf(job)!;
    const spec = location.spec as PodSpec & { containers: object[] };
    const { sidecar, stop, injected } = expected[recipe]!;
    const containers = injected ? [...spec.containers, { name: sidecar, image: 'injected:1' }] : spec.containers;
    const role = classifyContainers({ ...spec, containers }, podAnnotationsOf(job, location)).find((r) => r.name === sidecar);
    t.equal(role?.role, 'sidecar', `${recipe}: ${sidecar} is a sidecar`);
    t.equal(role?.markers.stop.kind === 'http' ? role.markers.stop.url : 'signal', stop, `${recipe}: stopped by ${stop}`);
  }
});

t.test('the mistake the page quotes is the one the webhook and lint give, word for word', async (t) => {
  const quoted = fences(section(page, 'What can be set, and where')).find((fence) => fence.language === '')!.body.trim();
  const job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'migrate' },
    spec: {
      template: {
        metadata: { annotations: { 'sidecar-terminator.io/sidecars': 'istio-proxy', 'stop.sidecar-terminator.io/istio-proxy': 'POST http://10.0.0.7:15020/quitquitquit' } },
        spec: { restartPolicy: 'Never', containers: [{ name: 'migrate', image: 'registry.example.com/migrate:1.4.0' }] },
      },
    },
  };
  t.same(inspectObject(job, [])!.findings.map(formatFinding), [quoted]);
});
