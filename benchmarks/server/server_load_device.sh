#!/usr/bin/env bash
# benchmarks/server/server_load.py on a machine with no package index and no PostgreSQL (the lent
# GPU machine's CPUs: 16 dedicated cores, Python 3.12 at python3), from the repository root:
#
#     bash benchmarks/server/server_load_device.sh [server_load options...]
#
# Output goes to the terminal and to $OUT/server_load.log (OUT defaults to /tmp/out).
#
# It needs .whl/ (git-ignored) prepared beforehand on a machine with pip and network:
#
#   1. Wheels for CPython 3.12 of the server's dependencies that the target's python3 lacks,
#      at the versions of this project's .venv (`.venv/bin/pip freeze`); numpy, scipy, httpx,
#      httpcore, idna, jinja2, markupsafe, pyyaml and psutil are taken from the target;
#      anyio, h11, click and typing_extensions are brought so the server stack matches .venv:
#
#      .venv/bin/pip download --only-binary=:all: --no-deps --python-version 3.12 \
#        --implementation cp --abi cp312 --platform manylinux2014_x86_64 \
#        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
#        --platform manylinux_2_27_x86_64 --platform manylinux_2_34_x86_64 \
#        --platform manylinux1_x86_64 -d .whl \
#        pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 \
#        typing-inspection==0.4.5 typing_extensions==4.16.0 PyJWT==2.15.1 \
#        cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 starlette==1.10.0 \
#        uvicorn==0.54.0 SQLAlchemy==2.1.9 greenlet==3.5.6 alembic==1.20.1 Mako==1.4.3 \
#        psycopg==3.3.9 psycopg-binary==3.3.9 python-multipart==0.0.34 anyio==4.16.0 \
#        h11==0.16.0 click==8.5.1
#
#   2. PostgreSQL 16.2 binaries from the PyPI wheel pgserver 0.1.4 (they do not depend on the
#      Python version), trimmed to what initdb and the server need, into .whl/pg/:
#
#      pip download --no-deps --only-binary=:all: --python-version 3.11 \
#        --platform manylinux2014_x86_64 -d /tmp/pgw pgserver==0.1.4
#      W=$(ls /tmp/pgw/pgserver-0.1.4-*.whl); I=/tmp/pgx/pgserver/pginstall
#      rm -rf /tmp/pgx .whl/pg && mkdir -p /tmp/pgx .whl/pg/bin .whl/pg/lib
#      unzip -q "$W" 'pgserver/pginstall/*' 'pgserver.libs/*' -d /tmp/pgx
#      cp -a $I/bin/{initdb,pg_ctl,postgres,psql,createdb,pg_isready} .whl/pg/bin/
#      cp -a $I/lib/postgresql .whl/pg/lib/            # plpgsql, snowball, encodings
#      cp -a /tmp/pgx/pgserver.libs/libpq-*.so.* .whl/pg/lib/   # the client tools' libpq
#      cp -a $I/share .whl/pg/
#      rm -rf .whl/pg/lib/postgresql/{pgxs,vector.so} .whl/pg/share/postgresql/extension/vector*
#
#   .whl/ is then about 34 MiB; the device tool copies it with carry [".whl"].
#
# Environment: OUT (log folder, /tmp/out), PGPORT (5432), PG_USER (the unprivileged user that
# runs PostgreSQL when this runs as root: nobody), SITE (/tmp/site), PYTHON (python3).
set -euo pipefail

ROOT=$(pwd)
OUT=${OUT:-/tmp/out}
PGPORT=${PGPORT:-5432}
PG_USER=${PG_USER:-nobody}
SITE=${SITE:-/tmp/site}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"

[[ -d .whl/pg/bin ]] || { echo "no .whl/pg here: run from the repository root, see the header" >&2; exit 2; }

# The wheels go into a folder of their own: no index there, and --no-deps because .whl/ names
# every missing package itself.
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$SITE" .whl/*.whl
# Absolute, not '.': the server subprocess runs with its working directory in a temporary folder.
export PYTHONPATH="$SITE:$ROOT"

# PostgreSQL refuses to run as root, and the checkout may lie where an unprivileged user cannot
# read: copy the binaries and make a fresh data directory under /tmp, both owned by that user.
WORK=$(mktemp -d /tmp/rnx-pg.XXXXXX)
PGBIN=$WORK/pg/bin
PGDATA=$WORK/data
cp -a .whl/pg "$WORK/pg"
mkdir -p "$PGDATA"
as_pg=()
if [[ $(id -u) -eq 0 ]]; then
  id -u "$PG_USER" >/dev/null 2>&1 || useradd --system --no-create-home "$PG_USER"
  chown -R "$PG_USER" "$WORK"
  chmod 755 "$WORK"
  if command -v runuser >/dev/null; then
    as_pg=(runuser -u "$PG_USER" --)
  else
    as_pg=(setpriv --reuid="$(id -u "$PG_USER")" --regid="$(id -g "$PG_USER")" --clear-groups)
  fi
fi
# The client tools find their libpq here (their RPATH points into the pgserver wheel's layout);
# only PostgreSQL's own commands get this, not Python.
pg() { env LD_LIBRARY_PATH="$WORK/pg/lib" "${as_pg[@]}" "$@"; }

stop_pg() {
  pg "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap stop_pg EXIT

# Trust auth on loopback only: a throwaway server that nothing else can reach.
pg "$PGBIN/initdb" -D "$PGDATA" -U postgres --auth=trust --encoding=UTF8 --locale=C >/dev/null
pg "$PGBIN/pg_ctl" -D "$PGDATA" -l "$WORK/postgres.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $PGPORT -k $WORK" start >/dev/null \
  || { cat "$WORK/postgres.log" >&2; exit 1; }
for _ in $(seq 60); do
  pg "$PGBIN/pg_isready" -q -h 127.0.0.1 -p "$PGPORT" && break
  sleep 1
done
pg "$PGBIN/pg_isready" -h 127.0.0.1 -p "$PGPORT" || { cat "$WORK/postgres.log" >&2; exit 1; }
pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres test
export RNX_TEST_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$PGPORT/test"

# What the figures were measured on.
{
  echo "nproc: $(nproc)"
  echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
  echo "load: $(cat /proc/loadavg)"
  echo "python: $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
  echo "postgres: $(pg "$PGBIN/postgres" --version)"
  # uvicorn's loop="auto" takes uvloop where it is installed: say which loop the server gets.
  echo "uvloop: $("$PYTHON" -c 'import uvloop; print(uvloop.__version__)' 2>/dev/null || echo absent)"
  echo "args: $*"
} | tee "$OUT/server_load.log"

# pipefail (above): the benchmark's exit status, not tee's, is the script's.
PYTHONUNBUFFERED=1 "$PYTHON" -m benchmarks.server.server_load "$@" 2>&1 | tee -a "$OUT/server_load.log"
