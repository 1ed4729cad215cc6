/**
 * S3 fault injection: a loopback HTTP proxy in front of a real S3 server (MinIO) that forwards
 * requests byte for byte and, by a probabilistic plan or a one-shot script, delays them, answers
 * 500 / 503 / 409 (or any status and S3 error code a script names) with S3's XML error body, loses
 * the response of a request the server applied, resets the connection before forwarding, or times
 * out; and, by a throttle, limits the bandwidth of bodies or stalls them part-way. Test-only: it lives under test/ (not
 * shipped), and no production setting routes through
 * it — a client reaches it only when a test or the soak points its endpoint at `proxy.endpoint`.
 *
 * The Host header is forwarded unchanged, so SigV4 signatures (which cover the proxy's host:port the
 * client signed) stay valid. Requests are path-style (`/{bucket}/{key}?{query}`), as our clients send them.
 *
 * With {@link ProxyOptions.stripConditionsSignedAs} it also stands for a store that takes conditional
 * writes and ignores them, as Google Cloud Storage's XML API and Garage do: it removes `If-Match` and
 * `If-None-Match` and re-signs the request, so the server applies a plain PUT and answers 200.
 */
import {
  Agent,
  createServer,
  request as forwardRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import type { Socket } from 'node:net';
import { Readable, Transform } from 'node:stream';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import type { S3Endpoint } from '../../src/devservers';

export type FaultKind = 'delay' | 'error500' | 'error503' | 'conflict409' | 'lostResponse' | 'timeout' | 'reset';
/** The order of a plan's draw: a kind added at the end leaves the faults an existing seed chooses unchanged. */
export const FAULT_KINDS: readonly FaultKind[] = [
  'delay',
  'error500',
  'error503',
  'conflict409',
  'lostResponse',
  'timeout',
  'reset',
];

/**
 * An answer of any status a script may give instead of forwarding: with `code`, S3's XML error body
 * (the SDK reads the code from it); without, a plain HTML page, as a load balancer in front of the store sends.
 */
export interface ErrorAnswer {
  readonly status: number;
  readonly code?: string;
  readonly message?: string;
}

export interface S3Request {
  method: string;
  bucket: string;
  /** Decoded object key; empty for bucket-level requests (listings, DeleteObjects). */
  key: string;
  /** The raw query string without `?` (e.g. `x-id=PutObject`, `delete`, `list-type=2&prefix=…`). */
  query: string;
  headers: Record<string, string | string[] | undefined>;
}

export interface FaultPlan {
  /** Probability per matching request, 0..1, of each fault; at most one fault per request. */
  probabilities?: Partial<Record<FaultKind, number>>;
  /** For 'delay': how long the request is held before it is forwarded. */
  delayMs?: number;
  /** For 'timeout': hold the request this long (it is never forwarded), then drop the socket without answering. */
  timeoutMs?: number;
  /** Seeds the choice of faults: the same seed and the same order of requests give the same faults. */
  seed?: number;
  /** Default: every request. */
  matches?: (request: S3Request) => boolean;
}

/**
 * Bandwidth limits on bodies (a slow link or a busy store), applied to matching requests only. A
 * body is relayed in slices of about 50 ms of its rate, so the client sees steady progress.
 */
export interface Throttle {
  /** Response bodies (a GET's object) reach the client at most this many bytes per second. */
  responseBytesPerSecond?: number;
  /** Request bodies (a PUT's object) reach the server at most this many bytes per second. */
  requestBytesPerSecond?: number;
  /**
   * After this many bytes of a response body the proxy sends nothing more, until the client gives up: a stalled body.
   */
  stallResponseAfterBytes?: number;
  /** The rates are for all matching requests together (one shared link); default: for each request on its own. */
  shared?: boolean;
  /** Default: every request. */
  matches?: (request: S3Request) => boolean;
}

/** One request the proxy forwarded and the server's full answer, also when the client never received it. */
export interface S3Exchange {
  readonly request: S3Request;
  /** The request body as sent (undefined beyond {@link MAX_OBSERVED_BODY_BYTES}). */
  readonly requestBody: Buffer | undefined;
  readonly status: number;
  readonly responseHeaders: IncomingHttpHeaders;
  /** The response body (undefined beyond {@link MAX_OBSERVED_BODY_BYTES}). */
  readonly responseBody: Buffer | undefined;
  /**
   * The answer was dropped instead of relayed (a lost response): the server applied the request, the client cannot
   * know.
   */
  readonly lost: boolean;
}

export interface ProxyOptions {
  /**
   * Drop `If-Match` and `If-None-Match` from every request and sign it anew with these credentials
   * (the client signed the headers, so the server would refuse it otherwise): a store that ignores conditions.
   */
  readonly stripConditionsSignedAs?: S3Endpoint;
}

/** The headers a store that ignores conditional writes behaves as if it never received. */
const CONDITIONAL_HEADERS = new Set(['if-match', 'if-none-match']);

/**
 * `req`'s headers without the conditional ones, signed by `signer` as the server will check them:
 * the path as sent (already escaped once, as S3 signs it), the query decoded, and the client's own
 * `x-amz-content-sha256` standing for the body, which passes through unchanged.
 */
async function withoutConditions(req: IncomingMessage, signer: SignatureV4): Promise<IncomingHttpHeaders> {
  if (![...CONDITIONAL_HEADERS].some((h) => req.headers[h] !== undefined)) return req.headers;
  const url = new URL(req.url ?? '/', 'http://proxy');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || CONDITIONAL_HEADERS.has(name) || name === 'authorization' || name === 'x-amz-date')
      continue;
    headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of url.searchParams) {
    const seen = query[name];
    query[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value];
  }
  const [hostname = '', port] = (headers.host ?? '').split(':');
  const signed = await signer.sign({
    method: req.method ?? 'PUT',
    protocol: 'http:',
    hostname,
    port: Number(port),
    path: url.pathname,
    query,
    headers,
  });
  return signed.headers;
}

/** A request {@link S3FaultProxy.hold} keeps from the server. */
export interface HeldRequest {
  /** Resolves when the request has arrived and is being held. */
  readonly arrived: Promise<S3Request>;
  /** Forwards the held request (or lets the next matching one through, if none has arrived). */
  release(): void;
}

/** Bodies larger than this are not kept for observers. */
export const MAX_OBSERVED_BODY_BYTES = 1024 * 1024;

export interface S3FaultProxy {
  /** http://127.0.0.1:PORT — point the S3 client here (path-style). */
  readonly endpoint: string;
  /** Replace the probabilistic plan (off = {}). */
  setPlan(plan: FaultPlan): void;
  /**
   * One-shot scripted faults, checked before the plan: the next `times` (default 1) matching requests
   * get `fault`, a kind or an answer of its own (counted in {@link injected} as `answer`).
   */
  script(fault: FaultKind | ErrorAnswer, matches: (r: S3Request) => boolean, times?: number): void;
  /**
   * Holds the next request that `matches` before it reaches the server, until `release()`; then it is
   * forwarded as sent (a request stuck in a proxy, or a process paused right after sending it). With
   * `every`, each later match (a client's retry of it) is held too, until the same `release()`.
   */
  hold(matches: (r: S3Request) => boolean, options?: { readonly every?: boolean }): HeldRequest;
  /** Replace the throttle (off = {}); requests already flowing keep the one they started with. */
  setThrottle(throttle: Throttle): void;
  /** Faults injected so far, by kind; `answer` counts scripted {@link ErrorAnswer}s. */
  readonly injected: Readonly<Record<FaultKind | 'answer', number>>;
  /** Requests seen so far, faulted or not. */
  readonly requests: number;
  /**
   * Client connections open now, and the most open at once since the proxy started: the sockets a client pool holds.
   */
  readonly connections: { readonly open: number; readonly peak: number };
  /**
   * Calls `listener` with every forwarded request once the server's answer is complete and before
   * the client receives any of it: the ground truth of what the server applied. Returns an unsubscribe.
   */
  observe(listener: (exchange: S3Exchange) => void): () => void;
  stop(): Promise<void>;
}

const DEFAULT_DELAY_MS = 200;
const DEFAULT_TIMEOUT_MS = 2_000;

/**
 * The error bodies S3 sends; the SDK reads the code from them (a 503 SlowDown is throttling and retried with backoff).
 */
const ERROR_ANSWERS: Readonly<Record<'error500' | 'error503' | 'conflict409', ErrorAnswer>> = {
  error500: { status: 500, code: 'InternalError', message: 'We encountered an internal error. Please try again.' },
  error503: { status: 503, code: 'SlowDown', message: 'Please reduce your request rate.' },
  conflict409: {
    status: 409,
    code: 'ConditionalRequestConflict',
    message: 'A conflicting conditional operation is currently in progress against this resource. Please try again.',
  },
};

/** mulberry32: a small seeded generator, so a plan's faults can be replayed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function describeRequest(req: IncomingMessage): S3Request {
  const url = req.url ?? '/';
  const queryAt = url.indexOf('?');
  const path = queryAt < 0 ? url : url.slice(0, queryAt);
  const [, bucket = '', ...keyParts] = path.split('/');
  return {
    method: req.method ?? 'GET',
    bucket: decodeURIComponent(bucket),
    key: decodeURIComponent(keyParts.join('/')),
    query: queryAt < 0 ? '' : url.slice(queryAt + 1),
    headers: req.headers,
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Reads a request body to its end without forwarding it: the server never sees the request. */
const drain = (req: IncomingMessage) =>
  new Promise<void>((resolve) => {
    req
      .on('end', resolve)
      .on('error', () => resolve())
      .resume();
  });

/** Keeps a copy of a stream's chunks as they flow; the body is offered to observers only while small. */
function collectBody(stream: IncomingMessage): (() => Buffer | undefined) & { chunks: Buffer[] } {
  const chunks: Buffer[] = [];
  let bytes = 0;
  stream.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    bytes += chunk.length;
  });
  return Object.assign(() => (bytes <= MAX_OBSERVED_BODY_BYTES ? Buffer.concat(chunks) : undefined), { chunks });
}

/**
 * Spaces out sends so that they average at most `bytesPerSecond`; one pacer may serve several bodies (a shared link).
 */
class Pacer {
  private nextAt = 0;
  constructor(readonly bytesPerSecond: number) {}

  /** The slice size for about 50 ms of the rate. */
  get slice(): number {
    return Math.max(1, Math.min(64 * 1024, Math.floor(this.bytesPerSecond / 20)));
  }

  /** Resolves when `bytes` more may be sent. */
  async take(bytes: number): Promise<void> {
    const now = performance.now();
    const at = Math.max(now, this.nextAt);
    this.nextAt = at + (bytes * 1000) / this.bytesPerSecond;
    if (at > now) await sleep(at - now);
  }
}

/** How one body is relayed: paced, and for a response possibly stalled after some bytes. */
interface BodyPace {
  readonly pacer: Pacer | undefined;
  readonly stallAfterBytes?: number;
}

/** A pass-through that paces what flows through it and, past `stallAfterBytes`, holds the rest until destroyed. */
function pacedStream({ pacer, stallAfterBytes = Infinity }: BodyPace): Transform {
  let passed = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      void (async () => {
        for (let at = 0; at < chunk.length && !this.destroyed;) {
          if (passed >= stallAfterBytes) return; // never calls `done`: the body stalls until the client gives up
          const size = Math.min(pacer?.slice ?? chunk.length, chunk.length - at, stallAfterBytes - passed);
          await pacer?.take(size);
          this.push(chunk.subarray(at, at + size));
          at += size;
          passed += size;
        }
        if (passed < stallAfterBytes) done();
      })();
    },
  });
}

const escapeXml = (s: string) => s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

export async function startS3FaultProxy(
  target: string,
  initialPlan: FaultPlan = {},
  options: ProxyOptions = {},
): Promise<S3FaultProxy> {
  const upstream = new URL(target);
  const stripAs = options.stripConditionsSignedAs;
  const signer =
    stripAs &&
    new SignatureV4({
      service: 's3',
      region: stripAs.region,
      sha256: Sha256,
      uriEscapePath: false,
      credentials: { accessKeyId: stripAs.accessKey, secretAccessKey: stripAs.secretKey },
    });
  const agent = new Agent({ keepAlive: true });
  const injected = Object.fromEntries([...FAULT_KINDS, 'answer'].map((k) => [k, 0])) as Record<
    FaultKind | 'answer',
    number
  >;
  const scripted: { fault: FaultKind | ErrorAnswer; matches: (r: S3Request) => boolean; remaining: number }[] = [];
  const sockets = new Set<Socket>();
  const observers = new Set<(exchange: S3Exchange) => void>();
  let plan = initialPlan;
  let throttle: Throttle = {};
  let sharedPacers: { request?: Pacer; response?: Pacer } = {};
  let random = seededRandom(initialPlan.seed ?? 0);
  let requests = 0;
  let peakConnections = 0;
  const holds: {
    matches: (r: S3Request) => boolean;
    arrive: (r: S3Request) => void;
    released: Promise<void>;
    every: boolean;
  }[] = [];

  const chooseFault = (request: S3Request): FaultKind | ErrorAnswer | undefined => {
    const script = scripted.find((s) => s.remaining > 0 && s.matches(request));
    if (script) {
      script.remaining--;
      return script.fault;
    }
    if (!plan.probabilities || !(plan.matches?.(request) ?? true)) return undefined;
    // One draw per matching request, in a fixed order of kinds: the seed alone decides the faults.
    const draw = random();
    let cumulative = 0;
    for (const kind of FAULT_KINDS) {
      cumulative += plan.probabilities[kind] ?? 0;
      if (draw < cumulative) return kind;
    }
    return undefined;
  };

  /** How the bodies of `request` are relayed under the current throttle; undefined when it does not apply. */
  const paceFor = (request: S3Request): { request?: BodyPace; response?: BodyPace } => {
    if (!(throttle.matches?.(request) ?? true)) return {};
    const pacer = (rate: number | undefined, direction: 'request' | 'response') =>
      rate === undefined
        ? undefined
        : throttle.shared
          ? (sharedPacers[direction] ??= new Pacer(rate))
          : new Pacer(rate);
    const requestPacer = pacer(throttle.requestBytesPerSecond, 'request');
    const responsePacer = pacer(throttle.responseBytesPerSecond, 'response');
    const stallAfterBytes = throttle.stallResponseAfterBytes;
    return {
      request: requestPacer && { pacer: requestPacer },
      response: responsePacer || stallAfterBytes !== undefined ? { pacer: responsePacer, stallAfterBytes } : undefined,
    };
  };

  /**
   * Forwards the request unchanged; with `loseResponse`, reads the whole answer (the server has applied the request)
   * and drops the client's connection instead of relaying it.
   */
  const forward = async (req: IncomingMessage, res: ServerResponse, request: S3Request, loseResponse: boolean) => {
    const pace = paceFor(request);
    const requestBody = collectBody(req);
    // Paused until piped below: no byte of the body flows while the headers are re-signed.
    req.pause();
    const headers = signer ? await withoutConditions(req, signer) : req.headers;
    const outgoing = forwardRequest({
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers,
      agent,
    });
    outgoing.on('response', (answer) => {
      const responseBody = collectBody(answer);
      answer.on('end', () => {
        const status = answer.statusCode ?? 502;
        for (const listener of observers) {
          listener({
            request,
            requestBody: requestBody(),
            status,
            responseHeaders: answer.headers,
            responseBody: responseBody(),
            lost: loseResponse,
          });
        }
        if (loseResponse) req.socket.destroy();
        else {
          res.writeHead(status, answer.statusMessage, answer.rawHeaders);
          const body = Buffer.concat(responseBody.chunks);
          if (!pace.response || body.length === 0) res.end(body);
          else {
            const paced = pacedStream(pace.response);
            res.on('close', () => paced.destroy());
            Readable.from([body], { objectMode: false }).pipe(paced).pipe(res);
          }
        }
      });
    });
    outgoing.on('error', () => req.socket.destroy());
    // The client gave up (its deadline): stop the forwarded request too.
    res.on('close', () => {
      if (!res.writableFinished) outgoing.destroy();
    });
    if (pace.request) req.pipe(pacedStream(pace.request)).pipe(outgoing);
    else req.pipe(outgoing);
  };

  const answerError = async (
    req: IncomingMessage,
    res: ServerResponse,
    request: S3Request,
    { status, code, message = '' }: ErrorAnswer,
  ) => {
    await drain(req);
    const resource = `/${request.bucket}/${request.key}`;
    const [type, body] =
      code === undefined
        ? ['text/html', `<html><head><title>${status}</title></head><body><h1>${status}</h1></body></html>`]
        : [
            'application/xml',
            `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${escapeXml(message)}</Message><Resource>${escapeXml(resource)}</Resource><RequestId>fault-proxy</RequestId></Error>`,
          ];
    res.writeHead(status, {
      'content-type': type,
      'content-length': Buffer.byteLength(body),
      'x-amz-request-id': 'fault-proxy',
    });
    res.end(body);
  };

  const timeOut = async (req: IncomingMessage) => {
    await drain(req);
    await Promise.race([
      sleep(plan.timeoutMs ?? DEFAULT_TIMEOUT_MS),
      new Promise((resolve) => req.socket.once('close', resolve)),
    ]);
    req.socket.destroy();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    requests++;
    const request = describeRequest(req);
    const held = holds.findIndex((h) => h.matches(request));
    if (held >= 0) {
      const { arrive, released, every } = holds[held]!;
      if (!every) holds.splice(held, 1);
      arrive(request);
      await released;
    }
    const fault = chooseFault(request);
    if (typeof fault === 'object') {
      injected.answer++;
      return answerError(req, res, request, fault);
    }
    if (fault) injected[fault]++;
    switch (fault) {
      case undefined:
        return forward(req, res, request, false);
      case 'delay':
        await sleep(plan.delayMs ?? DEFAULT_DELAY_MS);
        return forward(req, res, request, false);
      case 'lostResponse':
        return forward(req, res, request, true);
      case 'timeout':
        return timeOut(req);
      case 'reset':
        // The connection drops before anything is forwarded: the server never sees the request.
        return req.socket.destroy();
      default:
        return answerError(req, res, request, ERROR_ANSWERS[fault]);
    }
  };

  const server = createServer((req, res) => void handle(req, res));
  server.on('connection', (socket) => {
    sockets.add(socket);
    peakConnections = Math.max(peakConnections, sockets.size);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as { port: number };

  return {
    endpoint: `http://127.0.0.1:${port}`,
    setPlan(next) {
      plan = next;
      random = seededRandom(next.seed ?? 0);
    },
    setThrottle(next) {
      throttle = next;
      sharedPacers = {};
    },
    hold(matches, { every = false } = {}) {
      let arrive!: (r: S3Request) => void;
      let release!: () => void;
      const arrived = new Promise<S3Request>((resolve) => (arrive = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      const hold = { matches, arrive, released, every };
      holds.push(hold);
      return {
        arrived,
        release: () => {
          if (every) holds.splice(holds.indexOf(hold), 1);
          release();
        },
      };
    },
    script(fault, matches, times = 1) {
      scripted.push({ fault, matches, remaining: times });
    },
    get injected() {
      return { ...injected };
    },
    get requests() {
      return requests;
    },
    get connections() {
      return { open: sockets.size, peak: peakConnections };
    },
    observe(listener) {
      observers.add(listener);
      return () => observers.delete(listener);
    },
    async stop() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      agent.destroy();
      await closed;
    },
  };
}

/** Matchers for plans and scripts, by what the S3 adapter sends. */
export const s3Requests = {
  /** A conditional or plain PutObject. */
  put: (r: S3Request) => r.method === 'PUT' && r.key !== '',
  /** A compare-and-swap PutObject (`If-Match`). */
  compareAndSwap: (r: S3Request) => r.method === 'PUT' && r.headers['if-match'] !== undefined,
  /** A put-if-absent PutObject (`If-None-Match: *`). */
  createIfAbsent: (r: S3Request) => r.method === 'PUT' && r.headers['if-none-match'] === '*',
  getObject: (r: S3Request) => r.method === 'GET' && r.key !== '',
  list: (r: S3Request) => r.method === 'GET' && r.key === '' && /(^|&)list-type=2(&|$)/.test(r.query),
  /** A DeleteObject of one key (a conditional one carries `If-Match`). */
  deleteObject: (r: S3Request) => r.method === 'DELETE' && r.key !== '',
  deleteObjects: (r: S3Request) => r.method === 'POST' && /(^|&)delete(=|&|$)/.test(r.query),
} as const;
