#!/usr/bin/env bash
# Installs the pinned real agent CLIs (Claude Code and Codex CLI) with npm, once:
# a second run, or many at once, finds them there. Prints the bin directory.
# Never global: the packages, npm's cache and its logs all stay under DIR.
#
#   scripts/agent-clis.sh target/agent-clis   # -> target/agent-clis/latest/node_modules/.bin
#   KRAD_AGENT_CLIS=previous scripts/agent-clis.sh target/agent-clis
#                                             # -> target/agent-clis/previous/node_modules/.bin
#   scripts/agent-clis.sh --versions          # the pins of the chosen set, `name version` lines
#
# The pins, in one place. `latest` is what the registry had when they were last moved
# (docs/agents.md, "Moving to a new CLI version"); `previous` is the set before it, kept
# runnable so a difference can be told from a regression. Each set has its own directory.
set -euo pipefail

declare -A CLAUDE_VERSION=([latest]=2.1.337 [previous]=2.1.332)
declare -A CODEX_VERSION=([latest]=0.171.0 [previous]=0.171.0)

set_name=${KRAD_AGENT_CLIS:-latest}
if [ -z "${CLAUDE_VERSION[$set_name]+x}" ]; then
  echo "agent-clis: KRAD_AGENT_CLIS=$set_name is not a pin set (latest, previous)" >&2
  exit 2
fi
claude=${CLAUDE_VERSION[$set_name]}
codex=${CODEX_VERSION[$set_name]}

if [ "${1:-}" = "--versions" ]; then
  printf 'claude-code %s\ncodex %s\n' "$claude" "$codex"
  exit 0
fi

root=${1:?usage: agent-clis.sh DIR | --versions}
mkdir -p "$root/$set_name"
root=$(cd "$root" && pwd)
dir="$root/$set_name"
bin="$dir/node_modules/.bin"

installed() {
  local pkg=$1 want=$2 manifest="$dir/node_modules/$1/package.json"
  [ -f "$manifest" ] &&
    [ "$(node -p "require(process.argv[1]).version" "$manifest" 2>/dev/null)" = "$want" ]
}

ready() {
  installed @anthropic-ai/claude-code "$claude" &&
    installed @openai/codex "$codex" &&
    [ -x "$bin/claude" ] && [ -x "$bin/codex" ]
}

command -v npm >/dev/null || { echo "agent-clis: npm is not installed" >&2; exit 1; }

# One installer at a time; the others wait and then find the CLIs there.
exec 9>"$dir/.lock"
flock 9
if ! ready; then
  # One npm cache for every set: a CLI both sets pin is downloaded once.
  export npm_config_cache="$root/npm-cache"
  export npm_config_update_notifier=false
  npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
    "@anthropic-ai/claude-code@$claude" "@openai/codex@$codex" >&2
  ready || { echo "agent-clis: the install in $dir is incomplete" >&2; exit 1; }
fi
echo "$bin"
