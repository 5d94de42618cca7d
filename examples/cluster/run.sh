#!/bin/sh
# A local Switchyard deployment on a 3-server NATS cluster (docs/cluster.md):
# three nats-server processes with routes and JetStream (built from the
# module Switchyard pins), a session owner, a serve --takeover standby and
# two workers of pool "cpu". Everything stops on Ctrl-C.
#
#   examples/cluster/run.sh [FILE.dot [SESSION]]   (default: examples/cluster/demo.dot as "demo")
#
# Then, from another terminal:
#   export SWITCHYARD_NATS=nats://127.0.0.1:4221,nats://127.0.0.1:4222,nats://127.0.0.1:4223
#   switchyard pub demo work "hello" --edge src:work
#   switchyard watch demo
#   kill -9 "$(cat $DIR/owner.pid)"        # the standby takes the session over
#   kill "$(cat $DIR/n1.pid)"               # a server goes away; the session goes on
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
file=${1:-$repo/examples/cluster/demo.dot}
id=${2:-demo}
DIR=${DIR:-$(mktemp -d /tmp/switchyard-cluster.XXXXXX)}
mkdir -p "$DIR/bin"
echo "building nats-server (the pinned module) and switchyard into $DIR/bin"
(cd "$repo" && go build -o "$DIR/bin/nats-server" github.com/nats-io/nats-server/v2 &&
	go build -o "$DIR/bin/switchyard" ./cmd/switchyard)

servers="" procs=""
start() { # name, command...
	name=$1
	shift
	"$@" >"$DIR/$name.log" 2>&1 &
	echo $! >"$DIR/$name.pid"
	echo "started $name (pid $!, log $DIR/$name.log)"
}
# Switchyard's processes stop first (a session's owner records its state
# on the cluster as it stops), then the servers.
stop() {
	trap - EXIT
	for p in $procs; do kill "$p" 2>/dev/null || true; done
	for p in $procs; do wait "$p" 2>/dev/null || true; done
	for p in $servers; do kill "$p" 2>/dev/null || true; done
	wait
	echo "stopped; logs and stores are in $DIR"
}
trap stop EXIT
trap 'exit 130' INT TERM

routes=nats://127.0.0.1:6231,nats://127.0.0.1:6232,nats://127.0.0.1:6233
for i in 1 2 3; do
	start n$i setsid "$DIR/bin/nats-server" -n n$i -a 127.0.0.1 -p 422$i -m 822$i -js -sd "$DIR/n$i" \
		--cluster_name sy --cluster nats://127.0.0.1:623$i --routes $routes
	servers="$servers $!"
done
NATS=nats://127.0.0.1:4221,nats://127.0.0.1:4222,nats://127.0.0.1:4223
export SWITCHYARD_NATS=$NATS
# Each server is healthy once JetStream has a meta leader.
for i in 1 2 3; do
	until curl -sf "http://127.0.0.1:822$i/healthz" >/dev/null; do sleep 0.2; done
done
start worker-a "$DIR/bin/switchyard" worker --nats "$NATS" --pool cpu --replicas 3 --workdir "$DIR"
start worker-b "$DIR/bin/switchyard" worker --nats "$NATS" --pool cpu --replicas 3 --workdir "$DIR"
start owner "$DIR/bin/switchyard" serve "$file" --id "$id" --nats "$NATS" --replicas 3 --logs "$DIR/sessions"
start standby "$DIR/bin/switchyard" serve --all --takeover --nats "$NATS" --logs "$DIR/sessions"
procs="$(cat "$DIR/worker-a.pid" "$DIR/worker-b.pid" "$DIR/owner.pid" "$DIR/standby.pid")"
echo "SWITCHYARD_NATS=$NATS; session $id; Ctrl-C stops everything"
wait
