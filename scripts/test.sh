#!/usr/bin/env bash
# The test command: `bash scripts/test.sh [pytest arguments]`.
#
# Sets up what the suite needs, then runs it:
#   1. PostgreSQL 15 with pgvector on 127.0.0.1:5432 (trust auth for user postgres), NATS with
#      JetStream on 127.0.0.1:4222 and Redis on 127.0.0.1:6379. Whatever is missing is
#      installed (as root on Debian: scripts/install-pgvector.sh, apt-get) and whatever is not
#      running is started; elsewhere the script says in one line what it needs and stops.
#   2. The project, installed editable with its dev extra (into the active Python).
#   3. pytest, with the arguments given.
# Idempotent: on a machine already set up it only checks, installs the project and tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
PYTHON=${PYTHON:-python3}
command -v "$PYTHON" >/dev/null || PYTHON=python

need() {
  echo "scripts/test.sh needs $1" >&2
  exit 1
}

can_provision() { [ "$(id -u)" -eq 0 ] && [ -f /etc/debian_version ]; }

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port
  for _ in $(seq 60); do
    if listening "$2"; then return 0; fi
    sleep 0.5
  done
  need "$1 on 127.0.0.1:$2, which did not come up"
}

apt_install() { # packages…
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
}

pgvector_ready() {
  listening 5432 && command -v psql >/dev/null \
    && [ "$(psql -h 127.0.0.1 -U postgres -d postgres -Atc \
      "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'" 2>/dev/null)" = 1 ]
}

echo "== PostgreSQL 15 + pgvector"
if can_provision; then
  bash scripts/install-pgvector.sh # installs what is missing, starts the server
elif ! pgvector_ready; then
  need "PostgreSQL 15 with pgvector on 127.0.0.1:5432 (trust auth, user postgres): run it as root on Debian to have them installed, or set them up yourself"
fi
wait_for PostgreSQL 5432

echo "== NATS JetStream"
if ! listening 4222; then
  if [ ! -x /usr/sbin/nats-server ]; then
    can_provision || need "NATS with JetStream on 127.0.0.1:4222: run it as root on Debian to have it installed and started, or start it yourself"
    apt_install nats-server
  fi
  can_provision || need "NATS with JetStream on 127.0.0.1:4222: run it as root to have it started, or start it yourself"
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
fi
wait_for NATS 4222

echo "== Redis"
if ! listening 6379; then
  if ! command -v redis-server >/dev/null; then
    can_provision || need "Redis on 127.0.0.1:6379: run it as root on Debian to have it installed and started, or start it yourself"
    apt_install redis-server
  fi
  can_provision || need "Redis on 127.0.0.1:6379: run it as root to have it started, or start it yourself"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
wait_for Redis 6379

echo "== install (editable, dev extra)"
"$PYTHON" -m pip install -q -e '.[dev]'

echo "== pytest"
exec "$PYTHON" -m pytest "$@"
