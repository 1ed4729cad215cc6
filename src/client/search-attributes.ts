/**
 * The package's search attributes: the one list, checking a Temporal namespace against it, and
 * registering them. A namespace rejects a workflow task that upserts an attribute it does not know
 * (`BAD_SEARCH_ATTRIBUTES`) and retries it forever, the run left Running, so every entry that starts
 * work or a worker checks the namespace first ({@link requireSearchAttributes}) and refuses, naming
 * the missing attributes and the one command that registers them.
 */
import { isGrpcServiceError, type ConnectionLike } from '@temporalio/client';
import type { SearchAttributeType as SdkType } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { TypedError } from '../errors';
import { SEARCH_ATTRIBUTE_KEYS } from '../workflows/search-attributes';

/** Value types the Temporal CLI accepts for `--type` (and `tcld` for `--sa name=Type`). */
export type SearchAttributeType = 'Keyword' | 'Int' | 'Text' | 'Bool' | 'Double' | 'Datetime' | 'KeywordList';

const CLI_TYPE: Record<SdkType, SearchAttributeType> = {
  KEYWORD: 'Keyword',
  INT: 'Int',
  TEXT: 'Text',
  BOOL: 'Bool',
  DOUBLE: 'Double',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
};

/**
 * Every custom search attribute the workflows upsert, by name; every Temporal namespace they run in must register them.
 */
export const SEARCH_ATTRIBUTES: Readonly<Record<string, SearchAttributeType>> = Object.fromEntries(
  SEARCH_ATTRIBUTE_KEYS.map((key) => [key.name, CLI_TYPE[key.type]]),
);

const { IndexedValueType } = temporal.api.enums.v1;

/** The operator API's enum value for a CLI type name (`addSearchAttributes`). */
const indexedValueType = (type: SearchAttributeType): temporal.api.enums.v1.IndexedValueType =>
  IndexedValueType[
    `INDEXED_VALUE_TYPE_${type.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase()}` as keyof typeof IndexedValueType
  ];

/** The CLI type name of an operator API enum value. */
const typeName = (value: temporal.api.enums.v1.IndexedValueType): SearchAttributeType | undefined =>
  (Object.values(CLI_TYPE) as SearchAttributeType[]).find((type) => indexedValueType(type) === value);

/**
 * The commands that register `attributes` by hand: one `temporal operator search-attribute create` each (given several
 * `--name`s, the CLI registers only the first).
 */
export function searchAttributeCommands(
  namespace = 'default',
  attributes: Readonly<Record<string, SearchAttributeType>> = SEARCH_ATTRIBUTES,
): string[] {
  return Object.entries(attributes).map(
    ([name, type]) =>
      `temporal operator search-attribute create --namespace ${namespace} --name ${name} --type ${type}`,
  );
}

/** The one `tcld` command that registers `attributes` in a Temporal Cloud namespace (`<namespace>.<account>`). */
export function cloudSearchAttributeCommand(
  namespace: string,
  attributes: Readonly<Record<string, SearchAttributeType>> = SEARCH_ATTRIBUTES,
): string {
  const cloudNamespace = namespace.includes('.') ? namespace : `${namespace}.<account>`;
  return `tcld namespace search-attributes add --namespace ${cloudNamespace} ${Object.entries(attributes)
    .map(([name, type]) => `--sa ${name}=${type}`)
    .join(' ')}`;
}

/** One of the package's attributes as a Temporal namespace has it: absent, or registered under another type. */
export interface SearchAttributeMismatch {
  readonly name: string;
  readonly expected: SearchAttributeType;
  /** Undefined when the namespace has no attribute of that name. */
  readonly registered?: SearchAttributeType | 'another type';
}

/**
 * How the namespace was asked: its operator API (self-hosted, dev server), or visibility queries where that API is
 * refused (Temporal Cloud).
 */
export type SearchAttributeSource = 'operator API' | 'visibility queries';

/**
 * What {@link checkSearchAttributes} found in a Temporal namespace: an empty `mismatches` means every attribute is
 * there with its type.
 */
export interface SearchAttributeCheck {
  readonly namespace: string;
  readonly mismatches: readonly SearchAttributeMismatch[];
  readonly source: SearchAttributeSource;
}

/** gRPC status codes the checks tell apart. */
const GRPC = { invalidArgument: 3, notFound: 5, permissionDenied: 7, unimplemented: 12, unauthenticated: 16 } as const;

/** The Temporal namespace named does not exist on the server. */
export class TemporalNamespaceNotFoundError extends TypedError {
  readonly failureType = 'TemporalNamespaceNotFound';
  constructor(readonly namespace: string) {
    super(
      `Temporal namespace ${namespace} does not exist on this server: set TEMPORAL_NAMESPACE to yours, or create it (\`temporal operator namespace create --namespace ${namespace}\`)`,
    );
  }
}

/** The gRPC status of a failed call, from either connection (the client's, or a worker's native one). */
const grpcCode = (err: unknown): number | undefined => {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' ? code : undefined;
};
const grpcDetails = (err: unknown): string =>
  isGrpcServiceError(err) ? err.details : err instanceof Error ? err.message : String(err);

/**
 * Whether the namespace has every attribute of `attributes`, each with its type: through the operator
 * API's `listSearchAttributes` where the server grants it, else (Temporal Cloud refuses that API) one
 * visibility count per attribute, which the server validates against the namespace's attributes and
 * their value kinds (a Keyword registered as Text passes that one).
 */
export async function checkSearchAttributes(
  connection: ConnectionLike,
  namespace: string,
  attributes: Readonly<Record<string, SearchAttributeType>> = SEARCH_ATTRIBUTES,
): Promise<SearchAttributeCheck> {
  let registered: Record<string, temporal.api.enums.v1.IndexedValueType>;
  try {
    ({ customAttributes: registered = {} } = await connection.operatorService.listSearchAttributes({ namespace }));
  } catch (err) {
    const code = grpcCode(err);
    if (code === GRPC.notFound) throw new TemporalNamespaceNotFoundError(namespace);
    if (code !== GRPC.permissionDenied && code !== GRPC.unimplemented && code !== GRPC.unauthenticated) throw err;
    return {
      namespace,
      mismatches: await mismatchesByQuery(connection, namespace, attributes),
      source: 'visibility queries',
    };
  }
  const mismatches = Object.entries(attributes).flatMap(([name, expected]): SearchAttributeMismatch[] => {
    const found = registered[name];
    if (found === undefined) return [{ name, expected }];
    return found === indexedValueType(expected)
      ? []
      : [{ name, expected, registered: typeName(found) ?? 'another type' }];
  });
  return { namespace, mismatches, source: 'operator API' };
}

/**
 * A value of each type for a query that only has to be valid: the server checks the attribute's name and its value's
 * kind.
 */
const PROBE_VALUE: Record<SearchAttributeType, string> = {
  Keyword: '""',
  Text: '""',
  KeywordList: '""',
  Int: '0',
  Double: '0.5',
  Bool: 'false',
  Datetime: '"2000-01-01T00:00:00Z"',
};

async function mismatchesByQuery(
  connection: ConnectionLike,
  namespace: string,
  attributes: Readonly<Record<string, SearchAttributeType>>,
): Promise<SearchAttributeMismatch[]> {
  const checks = await Promise.all(
    Object.entries(attributes).map(async ([name, expected]): Promise<SearchAttributeMismatch | undefined> => {
      try {
        await connection.workflowService.countWorkflowExecutions({
          namespace,
          query: `${name} = ${PROBE_VALUE[expected]}`,
        });
        return undefined;
      } catch (err) {
        const code = grpcCode(err);
        if (code === GRPC.notFound) throw new TemporalNamespaceNotFoundError(namespace);
        if (code !== GRPC.invalidArgument) throw err;
        // "invalid search attribute: X" for an unknown one; "invalid value type for search attribute X of type T" for
        // another type.
        const other = /of type (\w+)/.exec(grpcDetails(err))?.[1];
        return other ? { name, expected, registered: other as SearchAttributeType } : { name, expected };
      }
    }),
  );
  return checks.filter((m): m is SearchAttributeMismatch => m !== undefined);
}

/**
 * The Temporal namespace lacks some of the package's search attributes, or has one under another type; the message
 * names them and the fix.
 */
export class SearchAttributesMissingError extends TypedError {
  readonly failureType = 'SearchAttributesMissing';
  readonly missing: readonly string[];
  constructor(
    readonly namespace: string,
    readonly mismatches: readonly SearchAttributeMismatch[],
  ) {
    const missing = mismatches.filter((m) => m.registered === undefined);
    const retyped = mismatches.filter((m) => m.registered !== undefined);
    const attrs = Object.fromEntries(missing.map((m) => [m.name, m.expected]));
    super(
      [
        missing.length &&
          `Temporal namespace ${namespace} lacks the search attributes ${missing.map((m) => `${m.name} (${m.expected})`).join(', ')} that this package's workflows set: ` +
            `register them with \`compaction-lease temporal setup\` (self-hosted or dev server, TEMPORAL_NAMESPACE=${namespace}), ` +
            `or on Temporal Cloud \`${cloudSearchAttributeCommand(namespace, attrs)}\``,
        retyped.length &&
          `Temporal namespace ${namespace} has ${retyped.map((m) => `${m.name} as ${m.registered}, not ${m.expected}`).join('; ')}: ` +
            'a search attribute keeps its type, so remove it (`temporal operator search-attribute remove --name …`) and run `compaction-lease temporal setup`',
      ]
        .filter(Boolean)
        .join('; and '),
    );
    this.missing = missing.map((m) => m.name);
  }
}

/**
 * Namespaces of a connection that passed the check: attributes are not unregistered in passing, so one check per
 * process suffices.
 */
const checked = new WeakMap<object, Set<string>>();

/**
 * Resolves when the Temporal namespace has every search attribute the workflows upsert, each with its
 * type; throws {@link SearchAttributesMissingError} naming the missing ones and the command that
 * registers them. A namespace that passed is not asked again on the same connection.
 */
export async function requireSearchAttributes(connection: ConnectionLike, namespace: string): Promise<void> {
  const passed = checked.get(connection) ?? new Set<string>();
  if (passed.has(namespace)) return;
  const { mismatches } = await checkSearchAttributes(connection, namespace);
  if (mismatches.length) throw new SearchAttributesMissingError(namespace, mismatches);
  checked.set(connection, passed.add(namespace));
}

/**
 * Registers those of `attributes` the Temporal namespace lacks, through the operator API (a
 * self-hosted or dev server; Temporal Cloud registers them with `tcld` or in its console), and
 * returns their names: an empty list means every one was already there. One registered under
 * another type is left as it is: {@link checkSearchAttributes} reports it.
 */
export async function registerSearchAttributes(
  connection: ConnectionLike,
  namespace = 'default',
  attributes: Readonly<Record<string, SearchAttributeType>> = SEARCH_ATTRIBUTES,
): Promise<string[]> {
  const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.entries(attributes).filter(([name]) => customAttributes?.[name] === undefined);
  if (missing.length) {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(missing.map(([name, type]) => [name, indexedValueType(type)])),
    });
  }
  return missing.map(([name]) => name);
}
