// Stop methods as users write them: by a known proxy's name, or as an HTTP request to the pod's
// own loopback; and grace periods.
import t from 'tap';
import { KNOWN_PROXIES, describeStop, parseGracePeriod, parseStopMethod } from '../../src/policy/index.ts';

t.test('known proxies get their documented endpoint, by name', async (t) => {
  const url = (value: string) => {
    const parsed = parseStopMethod(value);
    return 'method' in parsed && parsed.method.kind === 'http' ? `${parsed.method.method} ${parsed.method.url}` : parsed;
  };
  t.equal(url('istio-proxy'), 'POST http://localhost:15020/quitquitquit');
  t.equal(url('envoy'), 'POST http://localhost:9901/quitquitquit');
  t.equal(url('envoy:15000'), 'POST http://localhost:15000/quitquitquit', 'another admin port');
  t.equal(url('linkerd-proxy'), 'POST http://localhost:4191/shutdown');
  t.equal(url('cloud-sql-proxy'), 'POST http://localhost:9091/quitquitquit');
  t.same(Object.keys(KNOWN_PROXIES), ['istio-proxy', 'envoy', 'linkerd-proxy', 'cloud-sql-proxy']);
  t.same(parseStopMethod('signal'), { method: { kind: 'signal' } });
});

t.test('an HTTP request: method, loopback host, port, path', async (t) => {
  t.same(parseStopMethod('POST http://localhost:8080/quit'), { method: { kind: 'http', method: 'POST', url: 'http://localhost:8080/quit' } });
  t.same(parseStopMethod('PUT 127.0.0.1:8080'), { method: { kind: 'http', method: 'PUT', url: 'http://127.0.0.1:8080/' } }, 'the scheme and path may be left out');
  t.same(parseStopMethod('DELETE http://[::1]:9/stop?now=1'), { method: { kind: 'http', method: 'DELETE', url: 'http://[::1]:9/stop?now=1' } });
  const errors: Array<[string, RegExp]> = [
    ['POST http://10.0.0.7:15020/quitquitquit', /only go to the pod's own loopback .* not 10\.0\.0\.7/],
    ['POST http://example.com:80/', /not example\.com/],
    ['POST http://localhost/quit', /the port must be given/],
    ['POST http://localhost:70000/quit', /the port must be given, a number from 1 to 65535/],
    ['PATCH http://localhost:80/', /the method must be one of POST, PUT, GET, DELETE/],
    ['haproxy', /not a stop method: expected signal, one of istio-proxy/],
    ['istio-proxy:0', /the port of istio-proxy must be a number/],
    ['', /not a stop method/],
  ];
  for (const [value, error] of errors) {
    const parsed = parseStopMethod(value);
    t.match('error' in parsed ? parsed.error : parsed, error, JSON.stringify(value));
  }
});

t.test('grace periods are whole seconds, as terminationGracePeriodSeconds', async (t) => {
  t.same(parseGracePeriod('0'), { seconds: 0 });
  t.same(parseGracePeriod(' 45 '), { seconds: 45 });
  for (const value of ['', '-1', '1.5', '30s', '86401']) t.ok('error' in parseGracePeriod(value), JSON.stringify(value));
});

t.test('how a stop is told', async (t) => {
  t.equal(describeStop({ kind: 'signal' }), 'SIGTERM');
  t.equal(describeStop({ kind: 'http', method: 'POST', url: 'http://localhost:4191/shutdown' }), 'POST http://localhost:4191/shutdown');
});

t.test('a port that is no number, a path that is no printable ASCII', async (t) => {
  t.match(parseStopMethod('istio-proxy:http'), { error: /the port of istio-proxy must be a number/ });
  t.match(parseStopMethod('POST http://localhost:8080/\u0001'), { error: /the path must be printable ASCII without spaces/ });
});
