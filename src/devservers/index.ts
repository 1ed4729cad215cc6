export { startMinio, type MinioOptions } from './minio';
export { startMoto, type MotoOptions } from './moto';
export { startSeaweedfs, type SeaweedfsOptions } from './seaweedfs';
export { freePort } from './ports';
export type { S3Endpoint, S3Server } from './s3';
export { SEARCH_ATTRIBUTES, type SearchAttributeType } from '../client/search-attributes';
export {
  startTemporalDevServer,
  temporalCliPath,
  type TemporalDevServer,
  type TemporalDevServerOptions,
} from './temporal';
