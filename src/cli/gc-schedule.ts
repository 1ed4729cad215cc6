/** `gc schedule ensure|describe|pause|unpause|trigger`: the collector's one Temporal Schedule. */
import type { ScheduleDescription } from '@temporalio/client';
import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  DEFAULT_GC_SCHEDULE_ID,
  describeGcSchedule,
  ensureGcSchedule,
  pauseGcSchedule,
  triggerGcPass,
  unpauseGcSchedule,
  type GcCadence,
} from '../client';
import { namespaceId } from '../keys';
import type { GcOptions } from '../workflows/gc';
import type { CliContext } from './context';
import { durationMs, repeated } from './options';
import { isoTime, printFields, printJson } from './output';

export const DEFAULT_EVERY = '15m';

/** A positive duration as Temporal reads it (`90s`, `15m`, `2h`, `1 day`), else a usage error. */
export function parseEvery(value: string): string {
  const ms = durationMs(value);
  if (ms === undefined || !(ms >= 1000))
    throw new InvalidArgumentError(`"${value}" is not a duration of at least 1s (e.g. 90s, 15m, 2h)`);
  return value;
}

/**
 * Cron's shape as Temporal reads it (5 to 7 fields, or a `@daily`-style macro), else a usage error before any server is
 * asked.
 */
export function parseCron(value: string): string {
  const fields = value.trim().split(/\s+/);
  const macro = /^@[a-z]+( .+)?$/.test(value.trim());
  if (!macro && !(fields.length >= 5 && fields.length <= 7 && fields.every((f) => /^[0-9A-Za-z*?/,#-]+$/.test(f)))) {
    throw new InvalidArgumentError(
      `"${value}" is not a cron expression (5 fields: minute hour day-of-month month day-of-week, e.g. "*/15 * * * *")`,
    );
  }
  return value;
}

type CalendarDescription = NonNullable<ScheduleDescription['spec']['calendars']>[number];
const CALENDAR_FIELDS = ['second', 'minute', 'hour', 'dayOfMonth', 'month', 'dayOfWeek'] as const;

/**
 * A calendar in cron's field order (`0 0-59/15 0-23 …`): the server keeps no cron string, only the calendar it parsed.
 */
export function calendarText(calendar: CalendarDescription): string {
  const field = (ranges: unknown): string =>
    (Array.isArray(ranges) ? ranges : [ranges])
      .map(
        (r: { start: unknown; end: unknown; step?: number }) =>
          `${String(r.start)}${r.end === r.start ? '' : `-${String(r.end)}`}${r.step && r.step > 1 ? `/${r.step}` : ''}`,
      )
      .join(',');
  return calendar.comment || CALENDAR_FIELDS.map((name) => field(calendar[name])).join(' ');
}

interface ScheduleOptions {
  readonly scheduleId: string;
  readonly json?: boolean;
}

interface EnsureOptions extends ScheduleOptions {
  readonly cron?: string;
  readonly every?: string;
  readonly dryRun?: boolean;
  readonly namespace?: string[];
  readonly replace?: boolean;
}

/** What `describe --json` prints: the schedule as an operator reads it, not the raw protobuf. */
export function scheduleView(d: ScheduleDescription) {
  return {
    scheduleId: d.scheduleId,
    paused: d.state.paused,
    note: d.state.note,
    cadence: {
      calendars: d.spec.calendars ?? [],
      intervals: (d.spec.intervals ?? []).map((i) => ({ everyMs: i.every })),
    },
    taskQueue: d.action.taskQueue,
    pass: (d.action.args?.[0] ?? {}) as GcOptions,
    nextActionTimes: d.info.nextActionTimes.map((t) => t.toISOString()),
    recentActions: d.info.recentActions.map((a) => ({
      scheduledAt: a.scheduledAt.toISOString(),
      takenAt: a.takenAt.toISOString(),
      ...a.action.workflow,
    })),
    runningActions: d.info.runningActions.map((a) => a.workflow),
    numActionsTaken: d.info.numActionsTaken,
    numActionsSkippedOverlap: d.info.numActionsSkippedOverlap,
    numActionsMissedCatchupWindow: d.info.numActionsMissedCatchupWindow,
  };
}

async function ensure(ctx: CliContext, options: EnsureOptions): Promise<void> {
  const cadence: GcCadence = options.cron
    ? { cron: options.cron }
    : { every: (options.every ?? DEFAULT_EVERY) as Extract<GcCadence, { every: unknown }>['every'] };
  const namespaces = options.namespace?.map((ns) => namespaceId(ns));
  const store = ctx.storeIdentity();
  const pass: GcOptions = {
    dryRun: options.dryRun === true,
    ...(namespaces ? { namespaces } : {}),
    collectorTaskQueue: ctx.collectorTaskQueue(),
    ...(store !== undefined && { store }),
  };
  const handle = await ensureGcSchedule(await ctx.client(), {
    ...cadence,
    scheduleId: options.scheduleId,
    taskQueue: ctx.taskQueue(),
    pass,
    replace: options.replace === true,
  });
  const summary = { scheduleId: handle.scheduleId, ...cadence, taskQueue: ctx.taskQueue(), pass };
  if (options.json) printJson(ctx.out, summary);
  else
    ctx.out.line(
      `schedule ${handle.scheduleId}: ${'cron' in cadence ? `cron ${cadence.cron}` : `every ${cadence.every}`}, task queue ${summary.taskQueue}${pass.collectorTaskQueue === summary.taskQueue ? '' : `, collector task queue ${pass.collectorTaskQueue}`}${pass.dryRun ? ', dry run' : ''}`,
    );
}

async function describe(ctx: CliContext, options: ScheduleOptions): Promise<void> {
  const view = scheduleView(await describeGcSchedule(await ctx.client(), { scheduleId: options.scheduleId }));
  if (options.json) return printJson(ctx.out, view);
  printFields(ctx.out, [
    ['schedule', view.scheduleId],
    ['state', view.paused ? `paused${view.note ? `: ${view.note}` : ''}` : 'running'],
    [
      'cadence',
      [
        ...view.cadence.intervals.map((i) => `every ${i.everyMs / 1000}s`),
        ...view.cadence.calendars.map((c) => `calendar ${calendarText(c)}`),
      ].join('; '),
    ],
    ['task queue', view.taskQueue],
    ['pass', JSON.stringify(view.pass)],
    ['next', view.nextActionTimes.slice(0, 3).join(', ') || '-'],
    ['running', view.runningActions.map((w) => w.workflowId).join(', ') || '-'],
    [
      'recent',
      view.recentActions
        .slice(-3)
        .map((a) => `${a.workflowId} at ${isoTime(Date.parse(a.takenAt))}`)
        .join(', ') || '-',
    ],
    [
      'actions',
      `${view.numActionsTaken} taken, ${view.numActionsSkippedOverlap} skipped (overlap), ${view.numActionsMissedCatchupWindow} missed`,
    ],
  ]);
}

export function addGcScheduleCommands(gc: Command, ctx: CliContext): void {
  const schedule = gc
    .command('schedule')
    .description('the collector on a Temporal Schedule: passes never overlap, a failed one pauses it');
  const id = () => new Option('--schedule-id <id>', 'the schedule').default(DEFAULT_GC_SCHEDULE_ID);
  const note = (verb: string) =>
    new Option('--note <text>', `why it is ${verb}, shown in the UI`).default(`${verb} from the compaction-lease CLI`);
  schedule
    .command('ensure')
    .description(`create the schedule, or update it in place to these options (default: every ${DEFAULT_EVERY})`)
    .addOption(
      new Option('--cron <expr>', 'cron expression, e.g. "*/15 * * * *"').conflicts('every').argParser(parseCron),
    )
    .addOption(new Option('--every <duration>', 'interval, e.g. 15m or 2h').argParser(parseEvery))
    .option('--dry-run', 'every pass reports only, changing nothing')
    .option('--namespace <namespace>', 'collect only this namespace (repeatable)', repeated)
    .option(
      '--replace',
      "re-point a schedule that starts its passes on other task queues (another deployment's) to these",
    )
    .addOption(id())
    .option('--json', 'machine-readable output')
    .action((options: EnsureOptions) => ensure(ctx, options));
  schedule
    .command('describe')
    .description('state, cadence, next and recent passes')
    .addOption(id())
    .option('--json', 'machine-readable output')
    .action((options: ScheduleOptions) => describe(ctx, options));
  schedule
    .command('pause')
    .description('stop starting passes (a running one finishes)')
    .addOption(note('paused'))
    .addOption(id())
    .action(async (options: ScheduleOptions & { note: string }) => {
      await pauseGcSchedule(await ctx.client(), options.note, options);
      ctx.out.line(`schedule ${options.scheduleId} paused: ${options.note}`);
    });
  schedule
    .command('unpause')
    .description('resume the cadence')
    .addOption(note('unpaused'))
    .addOption(id())
    .action(async (options: ScheduleOptions & { note: string }) => {
      await unpauseGcSchedule(await ctx.client(), options.note, options);
      ctx.out.line(`schedule ${options.scheduleId} unpaused`);
    });
  schedule
    .command('trigger')
    .description('start a pass now; skipped if one is running')
    .addOption(id())
    .action(async (options: ScheduleOptions) => {
      await triggerGcPass(await ctx.client(), options);
      ctx.out.line(`schedule ${options.scheduleId} triggered`);
    });
}
