#!/usr/bin/env bash
# What the test suite needs on this machine, made ready before it runs (`make test` calls this; so
# does CI, through `make test`): MariaDB, Redis and RabbitMQ answering on their usual local ports,
# started when they are installed but down; Debian's nginx (the proxy test), Prometheus (the
# alerting tests) and docker-compose 1.29 (the compose file's interpolation), installed when
# missing. What cannot be done here (not root, no package manager, a service that will not start)
# stops at once with one line naming the command that would fix it.
# A missing service never makes a test skip: without this script the tests that need it fail.
set -euo pipefail

say() { echo "make test: $*" >&2; }
stop() { say "$1"; say "then run \`make test\` again"; exit 2; }

wait_for() {  # wait_for NAME COMMAND...: up to 120 s
  local name=$1; shift
  for _ in $(seq 1 120); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  stop "$name did not come up"
}

rooted() {  # rooted FIX: how to run a command as root here (nothing: we are root), or stop naming FIX
  if [ "$(id -u)" -eq 0 ]; then return 0; fi
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then echo sudo; return 0; fi
  stop "needs root to do this; run: sudo $1"
}

mariadb_up() { mysqladmin --protocol=tcp -h127.0.0.1 -uroot ping; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping; }
rabbitmq_up() { (exec 3<>/dev/tcp/127.0.0.1/5672); }  # a TCP probe: rabbitmqctl needs root's cookie

ensure_service() {  # ensure_service NAME PROBE BINARY START...
  local name=$1 probe=$2 binary=$3; shift 3
  if "$probe" >/dev/null 2>&1; then return 0; fi
  [ -x "$binary" ] || stop "$name is not installed ($binary); the tests need it at its local default"
  local sudo
  sudo=$(rooted "$*") || exit 2
  say "starting $name"
  $sudo "$@" >/dev/null 2>&1 || true
  wait_for "$name" "$probe"
}

ensure_package() {  # ensure_package BINARY PACKAGE
  local binary=$1 package=$2
  if [ -x "$binary" ]; then return 0; fi
  command -v apt-get >/dev/null 2>&1 || stop "$binary is missing: install Debian's $package"
  local install="apt-get install -y --no-install-recommends $package" sudo
  sudo=$(rooted "$install") || exit 2
  say "installing $package (Debian)"
  $sudo env DEBIAN_FRONTEND=noninteractive $install >/dev/null 2>&1 \
    || { $sudo apt-get update >/dev/null 2>&1 \
         && $sudo env DEBIAN_FRONTEND=noninteractive $install >/dev/null 2>&1; } \
    || stop "could not install $package; run: sudo $install"
  [ -x "$binary" ] || stop "$package is installed but $binary is missing; run: sudo $install"
}

ensure_service MariaDB mariadb_up /usr/sbin/mariadbd start-stop-daemon --start --oknodo --background \
  --exec /usr/sbin/mariadbd
ensure_service Redis redis_up /usr/bin/redis-server redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 \
  --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
ensure_service RabbitMQ rabbitmq_up /usr/sbin/rabbitmq-server rabbitmq-server -detached
ensure_package /usr/sbin/nginx nginx-light
ensure_package /usr/bin/promtool prometheus
ensure_package /usr/bin/docker-compose docker-compose
