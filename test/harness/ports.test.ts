// The ports the harness hands to the processes it starts (test/support/net.ts): leased host-wide,
// outside the ephemeral range, never one something listens on; and a process that could not bind
// its port, started again once on a new one (test/support/managed-process.ts).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ComponentStartError, exitedBeforeReady, ManagedProcess, portTakenIn, retryOnPortTaken, waitWhileRunning } from '../support/managed-process.ts';
import { ephemeralPortRange, httpStatus, leasablePortRanges, PortLease } from '../support/net.ts';

async function listenOn(port: number, host = '127.0.0.1'): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolveListen);
  });
  return server;
}

/** In another process: which of `ports` it could lease (bind the abstract socket of). */
function leasableElsewhere(ports: number[]): Promise<number[]> {
  const script = `
    const { createServer } = require('node:net');
    const ports = ${JSON.stringify(ports)};
    Promise.all(ports.map((port) => new Promise((done) => {
      const server = createServer();
      server.once('error', () => done(undefined));
      server.listen('\\0sidecar-terminator-port-' + port, () => { server.close(); done(port); });
    }))).then((got) => console.log(JSON.stringify(got.filter(Boolean))));`;
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.on('error', reject);
    child.on('close', () => resolveRun(JSON.parse(out) as number[]));
  });
}

t.test('ports are leased from outside the ephemeral range and the NodePort range', async (t) => {
  t.same(leasablePortRanges({ low: 32768, high: 60999 }), [{ low: 16384, high: 29999 }, { low: 61000, high: 65535 }], "Linux's default range");
  t.same(leasablePortRanges({ low: 1024, high: 20000 }), [{ low: 20001, high: 29999 }, { low: 32768, high: 65535 }]);
  t.throws(() => leasablePortRanges({ low: 1024, high: 65535 }), /no port to lease: the ephemeral range 1024-65535 .* sysctl -w net.ipv4.ip_local_port_range/);

  const { low, high } = ephemeralPortRange();
  const lease = new PortLease();
  t.teardown(() => lease.release());
  const ports: number[] = [];
  for (let i = 0; i < 50; i++) ports.push(await lease.take());
  t.equal(new Set(ports).size, 50, '50 different ports');
  t.same(lease.ports, ports);
  t.same(ports.filter((port) => (port >= low && port <= high) || (port >= 30000 && port <= 32767)), [], `none in ${low}-${high} (this machine's ephemeral range) nor in 30000-32767`);
});

t.test('a leased port is held host-wide until it is released', async (t) => {
  const lease = new PortLease();
  const ports = [await lease.take(), await lease.take(), await lease.take()];
  t.same(await leasableElsewhere(ports), [], 'another process cannot lease them');
  lease.release();
  t.same(await leasableElsewhere(ports), ports, 'it can once they are released');
  t.same(lease.ports, []);
});

t.test('a port something listens on is passed over', async (t) => {
  const probe = new PortLease();
  const first = await probe.take();
  probe.release();
  const squatter = await listenOn(first);
  t.teardown(() => squatter.close());
  // Two numbers to choose from, the first taken by a listener that does not lease.
  const lease = new PortLease([{ low: first, high: first + 1 }]);
  t.teardown(() => lease.release());
  const port = await lease.take();
  t.equal(port, first + 1);
  await t.rejects(lease.take(), /no TCP port could be leased in .* after 500 tries/, 'and none is left');
});

t.test('bind failures are read from Go and Node logs', async (t) => {
  t.same(portTakenIn('{"level":"fatal","msg":"x","error":"listen tcp 127.0.0.1:33177: bind: address already in use"}'), { port: 33177, line: 'listen tcp 127.0.0.1:33177: bind: address already in use' });
  t.same(portTakenIn('E1125 run.go:72] "command failed" err="failed to listen on 0.0.0.0:20001: listen tcp4 0.0.0.0:20001: bind: address already in use"')?.port, 20001);
  t.same(portTakenIn('Error: listen EADDRINUSE: address already in use 127.0.0.1:21000'), { port: 21000, line: 'listen EADDRINUSE: address already in use 127.0.0.1:21000' });
  t.equal(portTakenIn('listen unix /tmp/x.sock: bind: address already in use'), undefined, 'a Unix socket is not a port');

  const etcd = exitedBeforeReady('etcd', 'code 1', 'kube-apiserver /readyz', '{"level":"info","msg":"starting"}\n{"level":"fatal","msg":"discovery failed","error":"database file is locked"}\n', '/tmp/cp/etcd.log');
  t.equal(etcd.message, 'etcd did not start: exited (code 1) while waiting for kube-apiserver /readyz: discovery failed: database file is locked. What to do: fix what that error names and run again. Its log: /tmp/cp/etcd.log');
  const kubelet = exitedBeforeReady('kubelet', 'code 1', 'node Ready', 'I1125 10:00:00.000000    1234 server.go:1] starting\nE1125 10:00:01.000000    1234 run.go:72] "command failed" err="failed to validate kubelet flags"\n', undefined);
  t.match(kubelet.message, /^kubelet did not start: exited \(code 1\) while waiting for node Ready: "command failed" err="failed to validate kubelet flags"\. What to do: /);
  t.equal(exitedBeforeReady('x', 'SIGKILL', 'y', '', undefined).message, 'x did not start: exited (SIGKILL) while waiting for y. What to do: read its log for the error before the exit.');
});

t.test('a process that could not bind its port is started again once on a new one, and the log says so', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'st-ports-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  // The first port offered is taken by a listener outside the leases; the second is leased.
  const squatter = await listenOn(0);
  t.teardown(() => squatter.close());
  const lease = new PortLease();
  t.teardown(() => lease.release());
  const offered = [(squatter.address() as { port: number }).port, await lease.take()];
  const logged: string[] = [];
  let tries = 0;
  const started = await retryOnPortTaken('web server', async () => {
    const port = offered[tries++]!;
    const server = new ManagedProcess('web-server', [process.execPath, '-e', `require('node:http').createServer((q, s) => s.end('ok')).listen(${port}, '127.0.0.1')`], join(dir, `web-server-${tries}.log`));
    t.teardown(() => server.stop());
    await waitWhileRunning(`http://127.0.0.1:${port}/`, [server], Date.now() + 30_000, async () => (await httpStatus(`http://127.0.0.1:${port}/`)) === 200, { waitingOn: server });
    return port;
  }, (line) => logged.push(line));
  t.equal(tries, 2);
  t.equal(started, offered[1], 'it runs on the second port');
  t.same(logged, [`web server: web-server could not bind port ${offered[0]} (listen EADDRINUSE: address already in use 127.0.0.1:${offered[0]}); starting again on new ports (log of the first try: ${join(dir, 'web-server-1.log')})`]);
  t.match(readFileSync(join(dir, 'web-server-1.log'), 'utf8'), 'EADDRINUSE', 'the first try\'s log says why');
});

t.test('a second bind failure is thrown, saying it was tried twice; other failures are not tried again', async (t) => {
  const portTaken = () => new ComponentStartError({ component: 'etcd', reason: 'listen tcp 127.0.0.1:20000: bind: address already in use', remedy: 'stop it', portTaken: 20000 });
  const logged: string[] = [];
  let tries = 0;
  await t.rejects(retryOnPortTaken('control plane', () => {
    tries++;
    return Promise.reject(portTaken());
  }, (line) => logged.push(line)), { message: 'etcd did not start: listen tcp 127.0.0.1:20000: bind: address already in use (also after a second try on new ports). What to do: stop it.', portTaken: 20000 });
  t.equal(tries, 2);
  t.equal(logged.length, 1);

  tries = 0;
  await t.rejects(retryOnPortTaken('control plane', () => {
    tries++;
    return Promise.reject(new ComponentStartError({ component: 'etcd', reason: 'exited (code 1)', remedy: 'read its log' }));
  }, (line) => logged.push(line)), { message: /^etcd did not start: exited \(code 1\)\./ });
  t.equal(tries, 1, 'no second try');
  t.equal(logged.length, 1, 'nothing more logged');
});
