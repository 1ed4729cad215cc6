/** Math.random in a workflow is seeded per execution: a deterministic random source (job ids, pass ids). */
export const workflowRandom = (bytes: Uint8Array): void => {
  for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
};
