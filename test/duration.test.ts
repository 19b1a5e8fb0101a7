// The durations of src/duration.ts: flag values such as `500ms`, `90s`, `15m`, `12h`, `30d` and
// their combinations in milliseconds, and anything else refused as undefined.
import t from 'tap';
import { parseDuration } from '../src/duration.ts';

t.test('each unit, in milliseconds', async (t) => {
  t.same(['500ms', '90s', '15m', '12h', '30d'].map(parseDuration), [500, 90_000, 900_000, 43_200_000, 2_592_000_000]);
  t.equal(parseDuration('0s'), 0, 'zero is a duration');
});

t.test('units combined add up, in any order, ms never read as minutes', async (t) => {
  t.equal(parseDuration('1h30m'), 5_400_000);
  t.equal(parseDuration('1m500ms'), 60_500);
  t.equal(parseDuration('30s1d'), 86_430_000);
  t.equal(parseDuration('1m1m'), 120_000, 'a unit twice counts twice');
});

t.test('anything else is no duration', async (t) => {
  for (const text of ['', '10', 's', '1.5h', '-1s', '1 h', ' 1s', '1s ', '1H', '1w', '1us', '1h30', 'h1']) {
    t.equal(parseDuration(text), undefined, JSON.stringify(text));
  }
});
