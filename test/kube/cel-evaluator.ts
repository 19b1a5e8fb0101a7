// A small CEL interpreter for the fence's unit tests: enough of the language the fence's rules are
// written in (src/kube/cel.ts) to run a ValidatingAdmissionPolicy's validations on a request, as
// the API server does, without one. Optional fields (`.?f`, `[?k]`, optional.of, orValue), the
// macros all, exists, filter, map and has, and errors absorbed by && and || as CEL absorbs them.
// A function it does not know is an error, so a rule it cannot read fails the test rather than
// passing it. test/e2e/fence.test.ts runs the same rules on a real API server.

type Value = unknown;

/** An optional value: `none` when empty. */
class Optional {
  readonly present: boolean;
  readonly value: Value;
  constructor(present: boolean, value?: Value) {
    this.present = present;
    this.value = value;
  }
}
const NONE = new Optional(false);
const some = (value: Value) => new Optional(true, value);

type Node =
  | { kind: 'literal'; value: Value }
  | { kind: 'ident'; name: string }
  | { kind: 'list'; items: Node[] }
  | { kind: 'map'; entries: Array<[Node, Node]> }
  | { kind: 'select'; target: Node; field: string; optional: boolean }
  | { kind: 'index'; target: Node; index: Node; optional: boolean }
  | { kind: 'call'; target: Node | undefined; name: string; args: Node[] }
  | { kind: 'unary'; op: string; operand: Node }
  | { kind: 'binary'; op: string; left: Node; right: Node }
  | { kind: 'ternary'; condition: Node; then: Node; otherwise: Node };

const TOKEN = /\s*(?:("(?:[^"\\]|\\.)*")|(\d+(?:\.\d+)?)|([A-Za-z_]\w*)|(\.\?|\[\?|&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()[\]{}]))/y;

function tokenize(text: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < text.length) {
    const at = TOKEN.lastIndex;
    const match = TOKEN.exec(text);
    if (!match) {
      if (/^\s*$/.test(text.slice(at))) break;
      throw new Error(`CEL: cannot read ${JSON.stringify(text.slice(at, at + 20))}`);
    }
    tokens.push(match[0].trim());
  }
  return tokens;
}

const BINARY_LEVELS = [['||'], ['&&'], ['==', '!=', '<', '<=', '>', '>=', 'in'], ['+', '-'], ['*', '/', '%']];

class Parser {
  private at = 0;
  private readonly tokens: string[];
  constructor(tokens: string[]) {
    this.tokens = tokens;
  }

  parse(): Node {
    const node = this.expression();
    if (this.at !== this.tokens.length) throw new Error(`CEL: unexpected ${this.tokens[this.at]}`);
    return node;
  }

  private peek(): string | undefined {
    return this.tokens[this.at];
  }

  private take(expected?: string): string {
    const token = this.tokens[this.at++];
    if (token === undefined || (expected !== undefined && token !== expected)) throw new Error(`CEL: expected ${expected ?? 'more'}, got ${token}`);
    return token;
  }

  private expression(): Node {
    const condition = this.binary(0);
    if (this.peek() !== '?') return condition;
    this.take('?');
    const then = this.expression();
    this.take(':');
    return { kind: 'ternary', condition, then, otherwise: this.expression() };
  }

  private binary(level: number): Node {
    if (level === BINARY_LEVELS.length) return this.unary();
    let left = this.binary(level + 1);
    while (BINARY_LEVELS[level]!.includes(this.peek() ?? '')) {
      const op = this.take();
      left = { kind: 'binary', op, left, right: this.binary(level + 1) };
    }
    return left;
  }

  private unary(): Node {
    if (this.peek() === '!' || this.peek() === '-') {
      const op = this.take();
      return { kind: 'unary', op, operand: this.unary() };
    }
    return this.member();
  }

  private member(): Node {
    let node = this.primary();
    for (;;) {
      const token = this.peek();
      if (token === '.' || token === '.?') {
        this.take();
        const field = this.take();
        if (token === '.' && this.peek() === '(') node = { kind: 'call', target: node, name: field, args: this.args() };
        else node = { kind: 'select', target: node, field, optional: token === '.?' };
      } else if (token === '[' || token === '[?') {
        this.take();
        const index = this.expression();
        this.take(']');
        node = { kind: 'index', target: node, index, optional: token === '[?' };
      } else return node;
    }
  }

  private args(): Node[] {
    this.take('(');
    const args: Node[] = [];
    while (this.peek() !== ')') {
      args.push(this.expression());
      if (this.peek() === ',') this.take(',');
    }
    this.take(')');
    return args;
  }

  private primary(): Node {
    const token = this.take();
    if (token === '(') {
      const node = this.expression();
      this.take(')');
      return node;
    }
    if (token === '[') {
      const items: Node[] = [];
      while (this.peek() !== ']') {
        items.push(this.expression());
        if (this.peek() === ',') this.take(',');
      }
      this.take(']');
      return { kind: 'list', items };
    }
    if (token === '{') {
      const entries: Array<[Node, Node]> = [];
      while (this.peek() !== '}') {
        const key = this.expression();
        this.take(':');
        entries.push([key, this.expression()]);
        if (this.peek() === ',') this.take(',');
      }
      this.take('}');
      return { kind: 'map', entries };
    }
    if (token.startsWith('"')) return { kind: 'literal', value: JSON.parse(token) };
    if (/^\d/.test(token)) return { kind: 'literal', value: Number(token) };
    if (token === 'true' || token === 'false') return { kind: 'literal', value: token === 'true' };
    if (token === 'null') return { kind: 'literal', value: null };
    if (this.peek() === '(') return { kind: 'call', target: undefined, name: token, args: this.args() };
    return { kind: 'ident', name: token };
  }
}

const isMap = (value: Value): value is Record<string, Value> => typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Optional);

function equal(a: Value, b: Value): boolean {
  if (a instanceof Optional || b instanceof Optional) return a instanceof Optional && b instanceof Optional && a.present === b.present && (!a.present || equal(a.value, b.value));
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => equal(item, b[i]));
  if (isMap(a) || isMap(b)) return isMap(a) && isMap(b) && Object.keys(a).length === Object.keys(b).length && Object.keys(a).every((key) => key in b && equal(a[key], b[key]));
  return a === b;
}

/** The names in scope: `object`, `oldObject`, `request`, `variables`, and a macro's variable. */
type Scope = Record<string, Value>;

function field(target: Value, name: string, optional: boolean): Value {
  if (target instanceof Optional) return target.present ? field(target.value, name, true) : NONE;
  if (!isMap(target)) throw new Error(`CEL: no field ${name} on ${JSON.stringify(target)}`);
  if (optional) return name in target ? some(target[name]) : NONE;
  if (!(name in target)) throw new Error(`CEL: no such key: ${name}`);
  return target[name];
}

function index(target: Value, key: Value, optional: boolean): Value {
  if (target instanceof Optional) return target.present ? index(target.value, key, true) : NONE;
  if (Array.isArray(target) && typeof key === 'number') {
    if (key < target.length) return optional ? some(target[key]) : target[key];
    if (optional) return NONE;
    throw new Error(`CEL: index ${key} out of range`);
  }
  return field(target, String(key), optional);
}

function evaluate(node: Node, scope: Scope): Value {
  switch (node.kind) {
    case 'literal':
      return node.value;
    case 'ident':
      if (!(node.name in scope)) throw new Error(`CEL: undeclared reference to ${node.name}`);
      return scope[node.name];
    case 'list':
      return node.items.map((item) => evaluate(item, scope));
    case 'map':
      return Object.fromEntries(node.entries.map(([key, value]) => [String(evaluate(key, scope)), evaluate(value, scope)]));
    case 'select':
      // `optional.of(...)`, `optional.none()` are calls on the name `optional`, handled in call().
      return field(evaluate(node.target, scope), node.field, node.optional);
    case 'index':
      return index(evaluate(node.target, scope), evaluate(node.index, scope), node.optional);
    case 'unary': {
      const operand = evaluate(node.operand, scope);
      return node.op === '!' ? !truth(operand) : -(operand as number);
    }
    case 'ternary':
      return truth(evaluate(node.condition, scope)) ? evaluate(node.then, scope) : evaluate(node.otherwise, scope);
    case 'binary':
      return binary(node.op, node.left, node.right, scope);
    case 'call':
      return call(node, scope);
  }
}

function truth(value: Value): boolean {
  if (typeof value !== 'boolean') throw new Error(`CEL: no such overload: ${JSON.stringify(value)} is not a bool`);
  return value;
}

/** && and || as CEL has them: either side decides, an error on one side is absorbed when the other does. */
function logical(op: '&&' | '||', left: Node, right: Node, scope: Scope): boolean {
  const decides = op === '||';
  let failure: Error | undefined;
  try {
    if (truth(evaluate(left, scope)) === decides) return decides;
  } catch (error) {
    failure = error as Error;
  }
  if (truth(evaluate(right, scope)) === decides) return decides;
  if (failure) throw failure;
  return !decides;
}

function binary(op: string, leftNode: Node, rightNode: Node, scope: Scope): Value {
  if (op === '&&' || op === '||') return logical(op, leftNode, rightNode, scope);
  const left = evaluate(leftNode, scope);
  const right = evaluate(rightNode, scope);
  switch (op) {
    case '==':
      return equal(left, right);
    case '!=':
      return !equal(left, right);
    case 'in':
      if (Array.isArray(right)) return right.some((item) => equal(item, left));
      if (isMap(right)) return String(left) in right;
      throw new Error(`CEL: no such overload: in ${JSON.stringify(right)}`);
    case '+':
      if (Array.isArray(left) && Array.isArray(right)) return [...(left as Value[]), ...(right as Value[])];
      if (typeof left !== typeof right || (typeof left !== 'string' && typeof left !== 'number')) throw new Error('CEL: no such overload: +');
      return (left as string) + (right as string);
    case '<':
      return (left as number) < (right as number);
    case '<=':
      return (left as number) <= (right as number);
    case '>':
      return (left as number) > (right as number);
    case '>=':
      return (left as number) >= (right as number);
    default:
      throw new Error(`CEL: operator ${op} not supported here`);
  }
}

const MACROS = new Set(['all', 'exists', 'filter', 'map']);

function call(node: Extract<Node, { kind: 'call' }>, scope: Scope): Value {
  const { target, name, args } = node;
  if (target === undefined) {
    if (name === 'has') {
      const selected = args[0];
      if (selected?.kind !== 'select') throw new Error('CEL: has() takes a field selection');
      const on = evaluate(selected.target, scope);
      return isMap(on) && selected.field in on;
    }
    const values = args.map((arg) => evaluate(arg, scope));
    if (name === 'dyn') return values[0];
    if (name === 'size') return sizeOf(values[0]);
    throw new Error(`CEL: function ${name} not supported here`);
  }
  if (target.kind === 'ident' && target.name === 'optional' && !('optional' in scope)) {
    if (name === 'of') return some(evaluate(args[0]!, scope));
    if (name === 'none') return NONE;
  }
  const on = evaluate(target, scope);
  if (MACROS.has(name)) {
    const [variable, body] = args;
    if (variable?.kind !== 'ident' || body === undefined) throw new Error(`CEL: ${name}(x, expression) expected`);
    const items = Array.isArray(on) ? on : isMap(on) ? Object.keys(on) : undefined;
    if (!items) throw new Error(`CEL: ${name} on ${JSON.stringify(on)}`);
    const each = (item: Value) => evaluate(body, { ...scope, [variable.name]: item });
    if (name === 'all') return items.every((item) => truth(each(item)));
    if (name === 'exists') return items.some((item) => truth(each(item)));
    if (name === 'filter') return items.filter((item) => truth(each(item)));
    return items.map(each);
  }
  const values = args.map((arg) => evaluate(arg, scope));
  if (on instanceof Optional) {
    if (name === 'orValue') return on.present ? on.value : values[0];
    if (name === 'hasValue') return on.present;
    if (name === 'or') return on.present ? on : values[0];
    if (name === 'value' && on.present) return on.value;
  }
  if (typeof on === 'string') {
    const text = values[0] as string;
    if (name === 'startsWith') return on.startsWith(text);
    if (name === 'endsWith') return on.endsWith(text);
    if (name === 'contains') return on.includes(text);
    if (name === 'matches') return new RegExp(text).test(on);
    if (name === 'lowerAscii') return on.toLowerCase();
    if (name === 'trim') return on.trim();
    if (name === 'split') return on.split(text);
  }
  if (name === 'size') return sizeOf(on);
  throw new Error(`CEL: method ${name} not supported here on ${JSON.stringify(on)}`);
}

function sizeOf(value: Value): number {
  if (typeof value === 'string' || Array.isArray(value)) return value.length;
  if (isMap(value)) return Object.keys(value).length;
  throw new Error(`CEL: size of ${JSON.stringify(value)}`);
}

/** The syntax tree of a CEL expression; throws on text this interpreter cannot read. */
export function parseCel(expression: string): Node {
  return new Parser(tokenize(expression)).parse();
}

/** The value of a CEL expression with these names in scope; throws on an error, as CEL's evaluation fails. */
export function evaluateCel(expression: string, scope: Scope): Value {
  return evaluate(parseCel(expression), scope);
}

/** What a ValidatingAdmissionPolicy's variables and validations make of a request. */
export interface PolicyText {
  variables: ReadonlyArray<{ name: string; expression: string }>;
  validations: ReadonlyArray<{ expression: string; message?: string; messageExpression?: string }>;
}

/**
 * The messages of the validations that refuse the write (none: admitted), the policy's variables
 * evaluated on first use as the API server does. A validation that fails to evaluate refuses it
 * too (the fence's failurePolicy is Fail), its message then the error's.
 */
export function refusals(policy: PolicyText, request: { request: Value; object: Value; oldObject?: Value }): string[] {
  const variables: Record<string, Value> = {};
  const declared = new Map(policy.variables.map((variable) => [variable.name, variable.expression]));
  const scope: Scope = { request: request.request, object: request.object, oldObject: request.oldObject ?? null };
  scope.variables = new Proxy(variables, {
    has: (_cache, name) => typeof name === 'string' && declared.has(name),
    get: (cache, name) => {
      if (typeof name !== 'string' || !declared.has(name)) return undefined;
      if (!(name in cache)) cache[name] = evaluateCel(declared.get(name)!, scope);
      return cache[name];
    },
  });
  const refused: string[] = [];
  for (const validation of policy.validations) {
    try {
      if (evaluateCel(validation.expression, scope) === true) continue;
      refused.push(validation.messageExpression ? String(evaluateCel(validation.messageExpression, scope)) : (validation.message ?? validation.expression));
    } catch (error) {
      refused.push(`error: ${(error as Error).message}`);
    }
  }
  return refused;
}
