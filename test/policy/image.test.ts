import t from 'tap';
import { isAllowedImage, isSameImage, normalizeImage, parseImageReference } from '../../src/policy/index.ts';

t.test('valid references', async (t) => {
  for (const ref of ['busybox', 'busybox:1.36', 'library/busybox', 'ghcr.io/org/app:v1.2.3', 'localhost:5000/x/y:tag', 'registry.example.com/quick-exit@sha256:' + 'f'.repeat(64), 'a/b/c/d:1_2-3.4', '[::1]:5000/img:1']) {
    t.ok(parseImageReference(ref), ref);
  }
  t.same(parseImageReference('ghcr.io/org/app:v1@sha256:' + 'a'.repeat(64)), { name: 'ghcr.io/org/app', tag: 'v1', digest: 'sha256:' + 'a'.repeat(64) });
});

t.test('invalid references', async (t) => {
  for (const ref of ['', 'Busybox', 'busybox:', 'busy box', ':tag', 'a//b', 'app:' + 't'.repeat(129), 'app@sha256:short', '-app', 'x'.repeat(256)]) {
    t.notOk(parseImageReference(ref), JSON.stringify(ref));
  }
});

t.test('normalization and equality', async (t) => {
  t.equal(normalizeImage('nginx'), 'docker.io/library/nginx:latest');
  t.equal(normalizeImage('bitnami/nginx:1'), 'docker.io/bitnami/nginx:1');
  t.equal(normalizeImage('ghcr.io/org/app'), 'ghcr.io/org/app:latest');
  t.equal(normalizeImage('localhost/app:1'), 'localhost/app:1');
  t.equal(normalizeImage('app@sha256:' + 'a'.repeat(64)), 'docker.io/library/app@sha256:' + 'a'.repeat(64));
  t.ok(isSameImage('nginx', 'docker.io/library/nginx:latest'));
  t.notOk(isSameImage('nginx:1', 'nginx:2'));
});

t.test('allowlist patterns', async (t) => {
  t.ok(isAllowedImage('registry.example.com/quick-exit:1', ['registry.example.com/quick-exit:*']));
  t.ok(isAllowedImage('busybox:1.36', ['docker.io/library/busybox:*']));
  t.notOk(isAllowedImage('registry.example.com/quick-exit-evil:1', ['registry.example.com/quick-exit:*']));
  t.notOk(isAllowedImage('a.b/c:1', ['a?b/c:1']), 'only * is special');
});
