// The version the add-on's default images carry (serve's --signal-image and --quick-exit-image) is
// the package's, and the chart's appVersion, so that a release bumps all three together.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse } from 'yaml';
import { ADDON_VERSION, IMAGE_REPOSITORY, POD_IMAGES, publishedImage } from '../../src/policy/names.ts';
import { repoRoot } from '../support/repo.ts';

t.test("ADDON_VERSION is package.json's version and the chart's appVersion", async (t) => {
  const manifest = JSON.parse(readFileSync(`${repoRoot}/package.json`, 'utf8')) as { version: string };
  const chart = parse(readFileSync(`${repoRoot}/charts/sidecar-terminator/Chart.yaml`, 'utf8')) as { appVersion: string };
  t.equal(ADDON_VERSION, manifest.version);
  t.equal(ADDON_VERSION, chart.appVersion);
});

t.test('publishedImage names an image as a release publishes it', async (t) => {
  t.equal(publishedImage(POD_IMAGES.signal), `${IMAGE_REPOSITORY}/stop-sidecar:${ADDON_VERSION}`);
  t.equal(publishedImage(POD_IMAGES.quickExit, '1.2.3', 'registry.example.com/st'), 'registry.example.com/st/quick-exit:1.2.3');
});
