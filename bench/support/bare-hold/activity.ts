/**
 * The bare floor's activity: a heartbeat once per refresh interval, as a lease keeper beats, and a
 * wait between; no lease, no store, no work. It ends only when cancelled (the SDK's sleep rejects).
 */
import { Context } from '@temporalio/activity';

export function bareHoldActivities(beatEveryMs: number) {
  return {
    async bareHold(): Promise<void> {
      const ctx = Context.current();
      for (;;) {
        await ctx.sleep(beatEveryMs);
        ctx.heartbeat();
      }
    },
  };
}

export type BareHoldActivities = ReturnType<typeof bareHoldActivities>;
