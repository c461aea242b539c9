#!/usr/bin/env bash
# Installs the pinned real agent CLIs (Claude Code and Codex CLI) into DIR with npm,
# once: a second run, or many at once, finds them there. Prints the bin directory.
# Never global: the packages, npm's cache and its logs all stay under DIR.
#
#   scripts/agent-clis.sh target/agent-clis   # -> target/agent-clis/node_modules/.bin
set -euo pipefail

CLAUDE_VERSION=2.1.197
CODEX_VERSION=0.171.0

dir=${1:?usage: agent-clis.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
bin="$dir/node_modules/.bin"

installed() {
  local pkg=$1 want=$2 manifest="$dir/node_modules/$1/package.json"
  [ -f "$manifest" ] &&
    [ "$(node -p "require(process.argv[1]).version" "$manifest" 2>/dev/null)" = "$want" ]
}

ready() {
  installed @anthropic-ai/claude-code "$CLAUDE_VERSION" &&
    installed @openai/codex "$CODEX_VERSION" &&
    [ -x "$bin/claude" ] && [ -x "$bin/codex" ]
}

command -v npm >/dev/null || { echo "agent-clis: npm is not installed" >&2; exit 1; }

# One installer at a time; the others wait and then find the CLIs there.
exec 9>"$dir/.lock"
flock 9
if ! ready; then
  export npm_config_cache="$dir/npm-cache"
  export npm_config_update_notifier=false
  npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_VERSION" "@openai/codex@$CODEX_VERSION" >&2
  ready || { echo "agent-clis: the install in $dir is incomplete" >&2; exit 1; }
fi
echo "$bin"
