// Small builders of CEL text, so that a long expression reads as what it checks. Each returns a
// fragment; none adds parentheses the caller did not ask for (group does), so the text composed
// is exactly the text written out.

/** A CEL literal: a JSON string or list of strings reads the same in CEL. */
export const literal = (value: string | readonly string[]): string => JSON.stringify(value);

/** A CEL map literal of strings, `{"key": "value"}`. */
export const celMap = (map: Readonly<Record<string, string>>): string => `{${Object.entries(map).map(([key, value]) => `${literal(key)}: ${literal(value)}`).join(', ')}}`;

export const group = (expression: string): string => `(${expression})`;
export const and = (...expressions: string[]): string => expressions.join(' && ');
export const or = (...expressions: string[]): string => expressions.join(' || ');
export const not = (expression: string): string => `!${expression}`;
export const ternary = (condition: string, then: string, otherwise: string): string => `${condition} ? ${then} : ${otherwise}`;

/** A validation of one write: anything else passes it, that write only when `allowed`. */
export const onlyIf = (write: string, allowed: string): string => or(not(write), allowed);

/** A policy variable, `variables.name`. */
export const variable = (name: string): string => `variables.${name}`;

/** An optional field holds this value: `object.?a.?b == optional.of(value)`. */
export const holds = (optionalField: string, value: string): string => `${optionalField} == optional.of(${value})`;

/** Every key of `next` but `except` equal in `previous`, and none removed. */
export const sameExcept = (next: string, previous: string, except: readonly string[]): string =>
  and(
    `dyn(${next}).all(k, k in ${literal(except)} || (k in dyn(${previous}) && dyn(${next})[k] == dyn(${previous})[k]))`,
    `dyn(${previous}).all(k, k in ${literal(except)} || k in dyn(${next}))`,
  );

/** Every entry of the map `next` but `key` equal in `previous`, and none removed. */
export const sameEntriesExcept = (next: string, previous: string, key: string): string =>
  and(`${next}.all(k, k == ${key} || (k in ${previous} && ${previous}[k] == ${next}[k]))`, `${previous}.all(k, k == ${key} || k in ${next})`);

/** Only these keys in the object. */
export const onlyKeys = (object: string, keys: readonly string[]): string => `dyn(${object}).all(k, k in ${literal(keys)})`;

/** The request is this write: a resource (and subresource) of a group, by one of these operations. */
export const request = (apiGroup: string, resource: string, subResource: string, operations: readonly string[]): string =>
  and(
    `request.resource.group == ${literal(apiGroup)}`,
    `request.resource.resource == ${literal(resource)}`,
    `request.?subResource.orValue("") == ${literal(subResource)}`,
    `request.operation in ${literal(operations)}`,
  );
