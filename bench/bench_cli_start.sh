#!/usr/bin/env bash
# How long the engram command takes to start: `engram --help`, `engram get KEY` on a small
# database, and `python -c "import engramdb.cli.app"`, timed by hyperfine (apt-get install
# hyperfine) over repeated runs, after warm-up runs (files in the page cache).
#
#   bash bench/bench_cli_start.sh [SRC ...]
#
# Each SRC is a src/ folder put first on PYTHONPATH (say, two checkouts to compare); without
# one, the installed package is timed. The engram command is the one beside this python. On a
# machine shared with other work, `nice -n -15 bash bench/bench_cli_start.sh …` (as root) keeps
# the figures closer to those of an idle machine.
set -euo pipefail
# The interpreter itself, not a launcher in front of it (pyenv's shims are shell scripts).
python=$("$(command -v python3 || command -v python)" -c 'import sys; print(sys.executable)')
engram="$(dirname "$python")/engram"
runs=${RUNS:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ENGRAM_DB="$work/bench.db" HF_HUB_OFFLINE=1

echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1);" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); $("$python" -V)"
"$engram" add user.city Lisbon --type profile >/dev/null
for src in "${@:-}"; do
  [ -n "$src" ] && echo "== PYTHONPATH=$src" || echo "== the installed package"
  PYTHONPATH="$src" hyperfine -N -w 3 -r "$runs" --style basic \
    "$engram --help" "$engram get user.city" "$python -c 'import engramdb.cli.app'" \
    2>&1 | grep -E "^Benchmark|Time \(mean|Range"
done
