// parseJsonBody: a body's nesting bounded, whether measured on what JSON.parse built (shorter
// bodies) or by the scan before it (longer ones). Every case runs both ways: padded with
// whitespace past SCAN_FROM_LENGTH, it is scanned. The scan counts brackets only outside strings,
// and a string ends at the first quote not escaped by an odd run of backslashes.
import t from 'tap';
import { BodyError, MAX_BODY_COLLECTIONS, MAX_BODY_DEPTH, SCAN_FROM_LENGTH, parseJsonBody } from '../../src/webhook/schema.ts';

const nested = (depth: number, inner = '1') => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
for (const scanned of [false, true]) {
  const how = scanned ? ' (scanned before JSON.parse)' : ' (measured after JSON.parse)';
  /** The body as it is, or padded past SCAN_FROM_LENGTH with whitespace (JSON's own), so that it is scanned. */
  const parse = (text: string) => parseJsonBody(scanned ? `${text}${' '.repeat(SCAN_FROM_LENGTH)}` : text);
  const refusal = (text: string) => {
  try {
    parse(text);
    return undefined;
  } catch (error) {
    return error instanceof BodyError ? `${error.statusCode} ${error.message}` : String(error);
  }
};

t.test(`the deepest nesting allowed is parsed, one level more is a 400${how}`, async (t) => {
  t.same(parse(nested(MAX_BODY_DEPTH)), JSON.parse(nested(MAX_BODY_DEPTH)));
  t.match(refusal(nested(MAX_BODY_DEPTH + 1)), /^400 request body nests deeper than 100 levels$/);
});

t.test(`brackets inside strings are not nesting, whatever the escapes before the closing quote${how}`, async (t) => {
  const strings = [
    '"[[[[{{{{"',
    String.raw`"\"[[[["`,
    String.raw`"\\"`,
    String.raw`"\\\"[[[[\\"`,
    String.raw`"a\\\\"`,
    String.raw`"\u005b\u007b"`,
    '"é[ü{"',
  ];
  for (const text of strings) {
    const body = `{"k":${nested(MAX_BODY_DEPTH - 1, `${text.replaceAll('[', '['.repeat(200))}`)}}`;
    t.same(parse(body), JSON.parse(body), `${text}: parsed`);
  }
  // After a string ending in backslashes, 99 levels deep, two more levels: an odd run escapes the
  // quote, so they are in the string (100 levels in all); an even run closes it, so they nest (102).
  const after = (run: string) => `{"k":${'['.repeat(MAX_BODY_DEPTH - 1)}"${run}", [[1]]${']'.repeat(MAX_BODY_DEPTH - 1)}}`;
  const odd = `{"k":${'['.repeat(MAX_BODY_DEPTH - 1)}"${'\\'.repeat(3)}", [[1]]"${']'.repeat(MAX_BODY_DEPTH - 1)}}`;
  t.same(parse(odd), JSON.parse(odd), 'an odd run: the brackets after the quote are in the string');
  t.match(refusal(after('\\'.repeat(2))), /^400 request body nests deeper than 100 levels$/, 'an even run closes the string: the brackets after it nest');
});

t.test(`an unterminated string or invalid JSON is a 400 from JSON.parse, never a hang${how}`, async (t) => {
  t.match(refusal('{"k":"[[[['), /^400 request body is not valid JSON$/);
  t.match(refusal(`{"k":"${'\\'.repeat(100_001)}`), /^400 request body is not valid JSON$/);
  t.match(refusal(''), /^400 request body is empty/);
});

t.test(`nesting under any key counts, "__proto__" included${how}`, async (t) => {
  t.match(refusal(`{"__proto__":${nested(MAX_BODY_DEPTH)}}`), /^400 request body nests deeper than 100 levels$/);
  // Three levels around the branch, one inside it: 101, then 100.
  t.match(refusal(`{"a":{"b":[{}, ${nested(MAX_BODY_DEPTH - 3, '{}')}]}}`), /^400 request body nests deeper than 100 levels$/, 'the deepest of several branches');
  t.equal(refusal(`{"a":{"b":[{}, ${nested(MAX_BODY_DEPTH - 4, '{}')}]}}`), undefined, 'one level less: parsed');
});
}

t.test('only a scanned body can hold too many objects and arrays: a shorter one cannot reach the bound', async (t) => {
  t.ok(SCAN_FROM_LENGTH < 2 * MAX_BODY_COLLECTIONS, 'each takes two characters at least');
  // The outer array, and one more inside than the bound allows: the bound plus two.
  const many = `[${'[],'.repeat(MAX_BODY_COLLECTIONS)}[]]`;
  t.throws(() => parseJsonBody(many), new BodyError(`request body holds more than ${MAX_BODY_COLLECTIONS} objects and arrays (${MAX_BODY_COLLECTIONS + 2}); no pod the API server accepts has that many`, 413), 'a 413 before JSON.parse');
});
