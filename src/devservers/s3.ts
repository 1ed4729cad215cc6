/** How to reach an S3-compatible test server; plain data, so it can cross vitest's `provide`. */
export interface S3Endpoint {
  endpoint: string;
  accessKey: string;
  secretKey: string;
  region: 'us-east-1';
}

/** A running S3-compatible test server: its endpoint, and how to stop it. */
export interface S3Server extends S3Endpoint {
  stop(): Promise<void>;
}
