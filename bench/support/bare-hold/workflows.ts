/**
 * The bare floor's workflow: one activity that only heartbeats and waits, under the activity policy
 * of the job's `compactUnderLease` (heartbeat timeout, retry policy, cancellation type), so what a
 * worker holds for it is what the SDK holds for any long heartbeated activity and nothing of ours.
 */
import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import { activityOptions, type ActivitySettings } from '../../../src/workflows/activity-options';
import type { BareHoldActivities } from './activity';

export async function bareHoldWorkflow(settings: ActivitySettings): Promise<void> {
  const { bareHold } = proxyActivities<BareHoldActivities>({
    ...activityOptions(settings).heartbeated('7 days'),
    cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  });
  await bareHold();
}
