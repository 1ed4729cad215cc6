import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { EMBEDDED_STORE_SETTINGS, S3_SETTINGS, settingFromEnv, settingSetInEnv } from '../config';
import { createEmbeddedObjectStore, EMBEDDED_ENV } from './embedded';
import { StoreConfigError, type ObjectStore } from './port';
import { createS3ObjectStore, S3_ENV, s3Identity, s3OptionsFromEnv } from './s3';

export * from './port';
export { createS3ObjectStore, s3OptionsFromEnv, S3_ENV, type S3StoreOptions } from './s3';
export {
  requireFitStore,
  STORE_PROPERTIES,
  StoreUnfitError,
  verifyStore,
  type ConditionalDelete,
  type StoreCheck,
  type StorePropertyId,
  type StorePropertyResult,
  type VerifyStoreOptions,
} from './probe';
export { createEmbeddedObjectStore, EMBEDDED_ENV, type EmbeddedStoreOptions } from './embedded';
export { dryRunStore, type RecordedWrite } from './dry-run';

/** The default embedded store file, relative to the working directory. */
export const DEFAULT_EMBEDDED_PATH = EMBEDDED_STORE_SETTINGS.path.default;

/**
 * The identity of the store the environment names, without opening it: S3's bucket and endpoint when
 * `COMPACTION_S3_BUCKET` is set, the embedded file when `COMPACTION_EMBEDDED_STORE` is; undefined when
 * it names neither (a client that starts work and leaves the store to its workers).
 */
export function storeIdentityFromEnv(env?: NodeJS.ProcessEnv): string | undefined {
  const bucket = settingSetInEnv(S3_SETTINGS, 'bucket', env);
  if (bucket) return s3Identity(bucket, undefined, env);
  const path = settingSetInEnv(EMBEDDED_STORE_SETTINGS, 'path', env);
  return path ? `embedded:${resolve(path)}` : undefined;
}

/**
 * S3 when `COMPACTION_S3_BUCKET` is set, else the embedded store at `COMPACTION_EMBEDDED_STORE`
 * (default `./data/store.sqlite`). `existing`: the store is only read (or is one a worker made),
 * so an embedded store file that is not there is a {@link StoreConfigError}, never a new empty store.
 */
export function objectStoreFromEnv(
  env?: NodeJS.ProcessEnv,
  operationDeadlineMs?: number,
  options: { existing?: boolean } = {},
): ObjectStore {
  if (settingSetInEnv(S3_SETTINGS, 'bucket', env))
    return createS3ObjectStore({ ...s3OptionsFromEnv(env), operationDeadlineMs });
  const path = settingFromEnv(EMBEDDED_STORE_SETTINGS, 'path', env);
  if (options.existing && !existsSync(path)) {
    throw new StoreConfigError(
      EMBEDDED_ENV,
      `no embedded store at ${path} (${S3_ENV.bucket} is unset, so the store is the SQLite file ${EMBEDDED_ENV}): ` +
        `point ${EMBEDDED_ENV} at the file your workers use, or set ${S3_ENV.bucket}`,
    );
  }
  return createEmbeddedObjectStore({ path });
}
