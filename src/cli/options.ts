/** Option parsers shared by several commands. */

/** Collects a repeatable option's values in order (`--namespace a --namespace b`). */
export const repeated = (value: string, previous: string[] = []): string[] => [...previous, value];
