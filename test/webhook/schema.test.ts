// parseJsonBody's scan before JSON.parse: brackets count only outside strings, and a string ends
// at the first quote not escaped by an odd run of backslashes.
import t from 'tap';
import { BodyError, MAX_BODY_DEPTH, parseJsonBody } from '../../src/webhook/schema.ts';

const nested = (depth: number, inner = '1') => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;
const refusal = (text: string) => {
  try {
    parseJsonBody(text);
    return undefined;
  } catch (error) {
    return error instanceof BodyError ? `${error.statusCode} ${error.message}` : String(error);
  }
};

t.test('the deepest nesting allowed is parsed, one level more is a 400', async (t) => {
  t.same(parseJsonBody(nested(MAX_BODY_DEPTH)), JSON.parse(nested(MAX_BODY_DEPTH)));
  t.match(refusal(nested(MAX_BODY_DEPTH + 1)), /^400 request body nests deeper than 100 levels$/);
});

t.test('brackets inside strings are not nesting, whatever the escapes before the closing quote', async (t) => {
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
    t.same(parseJsonBody(body), JSON.parse(body), `${text}: parsed`);
  }
  // After a string ending in backslashes, 99 levels deep, two more levels: an odd run escapes the
  // quote, so they are in the string (100 levels in all); an even run closes it, so they nest (102).
  const after = (run: string) => `{"k":${'['.repeat(MAX_BODY_DEPTH - 1)}"${run}", [[1]]${']'.repeat(MAX_BODY_DEPTH - 1)}}`;
  const odd = `{"k":${'['.repeat(MAX_BODY_DEPTH - 1)}"${'\\'.repeat(3)}", [[1]]"${']'.repeat(MAX_BODY_DEPTH - 1)}}`;
  t.same(parseJsonBody(odd), JSON.parse(odd), 'an odd run: the brackets after the quote are in the string');
  t.match(refusal(after('\\'.repeat(2))), /^400 request body nests deeper than 100 levels$/, 'an even run closes the string: the brackets after it nest');
});

t.test('an unterminated string or invalid JSON is a 400 from JSON.parse, never a hang', async (t) => {
  t.match(refusal('{"k":"[[[['), /^400 request body is not valid JSON$/);
  t.match(refusal(`{"k":"${'\\'.repeat(100_001)}`), /^400 request body is not valid JSON$/);
  t.match(refusal(''), /^400 request body is empty/);
});
