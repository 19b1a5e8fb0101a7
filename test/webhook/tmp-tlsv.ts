import * as tls from 'node:tls';
import selfsigned from 'selfsigned';
const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], { keyType: 'ec', algorithm: 'sha256' });
for (const serverMin of [undefined, 'TLSv1.2'] as const) {
  const server = tls.createServer({ key: pems.private, cert: pems.cert, ...(serverMin ? { minVersion: serverMin } : { minVersion: 'TLSv1' }), ciphers: 'DEFAULT:@SECLEVEL=0' }, (s) => s.end('hi'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as any).port;
  const result = await new Promise((resolve) => {
    const s = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false, minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT:@SECLEVEL=0' }, () => resolve('connected ' + s.getProtocol()));
    s.on('error', (e) => resolve('error ' + e.message));
  });
  console.log(serverMin, result);
  server.close();
}
