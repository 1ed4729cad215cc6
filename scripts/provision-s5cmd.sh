#!/usr/bin/env bash
# Installs s5cmd (the comparison point of bench/reclaim.ts) into
# $COMPACTION_LEASE_CACHE/s5cmd-bin (default ~/.cache/compaction-lease/s5cmd-bin), only when
# missing or at a different version. Logs go to stderr; stdout carries only the export line:
#   eval "$(scripts/provision-s5cmd.sh)"
set -euo pipefail

S5CMD_VERSION=${S5CMD_VERSION:-v2.3.0}   # pinned; `@latest` resolved to this when it was written

CACHE=${COMPACTION_LEASE_CACHE:-$HOME/.cache/compaction-lease}
BIN=$CACHE/s5cmd-bin/s5cmd

exec 3>&1 1>&2
log() { printf 'provision-s5cmd: %s\n' "$*"; }

# True when $BIN is s5cmd at $S5CMD_VERSION: recorded as the main module by `go install`, or
# stamped into its version string by the fallback build below.
installed() {
  [[ -x $BIN ]] || return 1
  [[ $(go version -m "$BIN" 2>/dev/null | awk '$1 == "mod" && !seen { print $3; seen = 1 }') == "$S5CMD_VERSION" ]] \
    || [[ $("$BIN" version 2>/dev/null) == "$S5CMD_VERSION-"* ]]
}

if installed; then
  log "s5cmd $S5CMD_VERSION present"
else
  command -v go >/dev/null || { log "go is required to build s5cmd"; exit 1; }
  module=github.com/peak/s5cmd/v2@$S5CMD_VERSION
  log "building $module into $BIN"
  # A truncated leftover of an interrupted copy can look current to go install; start from none.
  rm -f "$BIN"
  mkdir -p "$(dirname "$BIN")"
  if ! GOBIN=$(dirname "$BIN") go install "$module"; then
    # `go install m@v` also reads the module's version list (to report deprecation), which a
    # restricted proxy may refuse (403) while serving the version itself. Build the pinned
    # module from its own source instead: its go.mod and go.sum name exact versions, so no list is read
    # (its vendor/ is not in the module zip, hence -mod=readonly).
    log "go install failed; building $module from its module source (its go.sum pins every dependency)"
    dir=$(go mod download -json "$module" | awk -F'"' '$2 == "Dir" { print $4 }')
    [[ -n $dir ]] || { log "go mod download $module gave no source directory"; exit 1; }
    (cd "$dir" && GOFLAGS=-mod=readonly go build -trimpath -o "$BIN" \
      -ldflags "-X github.com/peak/s5cmd/v2/version.Version=$S5CMD_VERSION -X github.com/peak/s5cmd/v2/version.GitCommit=module" .)
  fi
  installed || { log "$BIN is not s5cmd $S5CMD_VERSION after the build"; exit 1; }
fi
"$BIN" version
printf 'export S5CMD_BIN=%q\n' "$BIN" >&3
