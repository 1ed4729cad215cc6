#!/usr/bin/env bash
# Evidence on a store no one here wrote: builds SeaweedFS (once, ~12 min of 2 cores; cached like
# MinIO), starts it beside the usual test servers, and runs the store probe and the store
# conformance suite against it (and, unchanged, against MinIO, moto and the embedded store).
# The probe's lines ("store probe on seaweedfs: …") are the measured rows of docs/stores.md.
#   bash scripts/check-stores.sh
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/provision.sh)"
eval "$(scripts/provision.sh seaweedfs)"
"$SEAWEEDFS_BIN" version
COMPACTION_TEST_STORES=seaweedfs exec npx vitest run --project integration \
  test/integration/store-probe.test.ts test/integration/store-conformance.test.ts "$@"
