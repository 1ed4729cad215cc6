/** MinIO's own count of S3 requests, by API: what a benchmark cost, from the server rather than a client's claim. */
import type { S3Server } from '../../src/devservers';
import { scrape } from './prometheus';

/**
 * MinIO's S3 request counters by API (public metrics: start MinIO with `MINIO_PROMETHEUS_AUTH_TYPE=public`). The v3
 * endpoint, because v2 serves a cached snapshot (seen here: counts a window behind).
 */
export async function minioRequests(minio: S3Server): Promise<Map<string, number>> {
  const samples = await scrape(`${minio.endpoint}/minio/metrics/v3/api/requests`);
  const byApi = new Map<string, number>();
  for (const s of samples) {
    if (s.name !== 'minio_api_requests_total' || s.labels.type !== 's3') continue;
    const api = s.labels.name!.toLowerCase();
    byApi.set(api, (byApi.get(api) ?? 0) + s.value);
  }
  return byApi;
}

/** The requests between two counts, by API; APIs not called are left out. */
export const requestDelta = (after: Map<string, number>, before: Map<string, number>): Map<string, number> =>
  new Map([...after].map(([api, n]) => [api, n - (before.get(api) ?? 0)] as [string, number]).filter(([, n]) => n > 0));

export const describeRequests = (delta: Map<string, number>): string =>
  [...delta]
    .sort()
    .map(([api, n]) => `${api} ${n}`)
    .join(', ') || 'none';
