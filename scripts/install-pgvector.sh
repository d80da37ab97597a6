#!/usr/bin/env bash
# Install the pgvector extension into the local PostgreSQL 15 and make sure the server runs.
#
# Debian 12 ships no pgvector for PostgreSQL 15, so the extension is built from Debian trixie's
# source package. trixie's source list lives in a temporary apt state: the machine's own apt
# sources stay untouched. A server installed by this script trusts loopback connections (the
# tests connect as postgres with no password). Idempotent: a second run only checks and
# (re)starts the server. Needs root (apt-get, make install); scripts/test.sh runs it.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
PG_MAJOR=15
CLUSTER=main

pg_config_bin=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
before=$(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR" 2>/dev/null || true)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
packages=("postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" dpkg-dev make gcc)
missing=()
for package in "${packages[@]}"; do installed "$package" || missing+=("$package"); done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -f "$("$pg_config_bin" --sharedir)/extension/vector.control" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
  base=$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' \
         | awk '$2=="bookworm"{print $1; exit}')
  echo "deb-src ${base} trixie main" > "$work/sources.list"
  # APT::Sandbox::User=root: the temporary state is root-only, so apt need not drop privileges.
  opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
        -o "APT::Sandbox::User=root"
        -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache")
  apt-get "${opts[@]}" update -qq
  (cd "$work" && apt-get "${opts[@]}" source -qq pgvector >/dev/null)
  make -s -C "$work"/pgvector-*/ PG_CONFIG="$pg_config_bin" -j"$(nproc)"
  make -s -C "$work"/pgvector-*/ PG_CONFIG="$pg_config_bin" install
fi

if [ -z "$before" ]; then
  # The server was installed just now, for the tests, which connect as postgres with no
  # password: trust connections from this machine's loopback (test machines only).
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' \
    "/etc/postgresql/$PG_MAJOR/$CLUSTER/pg_hba.conf"
fi

# Installing the server headers may have upgraded the server: a running server must restart
# to load the new binaries; a stopped one just starts.
after=$(dpkg-query -W -f='${Version}' "postgresql-$PG_MAJOR" 2>/dev/null || true)
ctl=(pg_ctlcluster --skip-systemctl-redirect "$PG_MAJOR" "$CLUSTER")
if pg_lsclusters -h | awk -v v="$PG_MAJOR" -v c="$CLUSTER" '$1==v && $2==c {print $4}' \
   | grep -q online; then
  if [ "$before" != "$after" ]; then "${ctl[@]}" restart; fi
else
  "${ctl[@]}" start
fi

for _ in $(seq 30); do
  if pg_isready -q -h 127.0.0.1 -p 5432; then
    echo "pgvector $(sed -n "s/^default_version = '\(.*\)'/\1/p" \
      "$("$pg_config_bin" --sharedir)/extension/vector.control") ready on PostgreSQL $PG_MAJOR"
    exit 0
  fi
  sleep 1
done
echo "PostgreSQL did not come up" >&2
exit 1
