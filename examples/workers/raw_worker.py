#!/usr/bin/env python3
"""A Switchyard worker in Python with no client library: the NATS text
protocol over a socket (INFO, CONNECT, PING/PONG, SUB, PUB, MSG/HMSG).

It serves the jobs of one pool (nodes with pool=NAME, usually type="remote")
as docs/workers.md describes: pull a job from the pool's consumer on the
work-queue stream SY_WORK, send in-progress acks while it runs, publish the
outcome envelope (protojson) to the job's Sy-Reply header, then ack it.

Its node work: the node's prompt (else the text of its inputs) in capitals,
and the context key worker.language=python.

    python3 raw_worker.py --nats nats://127.0.0.1:4222 --token ADMIN --pool py

examples/workers/worker.py is the same worker written with nats-py.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import uuid
from urllib.parse import urlparse

STREAM = "SY_WORK"


class Conn:
    """The few parts of a NATS connection a worker needs."""

    def __init__(self, url, token=None, user=None, password=None):
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 4222))
        self.rf = self.sock.makefile("rb")
        self.wlock = threading.Lock()
        line = self.rf.readline()
        if not line.startswith(b"INFO "):
            raise RuntimeError("not a NATS server: %r" % line[:80])
        opts = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True,
                "protocol": 1, "lang": "python-raw", "version": "1", "name": "switchyard-raw-worker"}
        if token:
            opts["auth_token"] = token
        elif user:
            opts["user"], opts["pass"] = user, password or ""
        self.send(b"CONNECT " + json.dumps(opts).encode() + b"\r\nPING\r\n")
        while True:
            line = self.rf.readline()
            if line.startswith(b"PONG"):
                break
            if line.startswith(b"-ERR") or not line:
                raise RuntimeError("connect: %s" % line.decode(errors="replace").strip())

    def send(self, data):
        with self.wlock:
            self.sock.sendall(data)

    def pub(self, subject, data, reply=None):
        head = "PUB %s %s%d\r\n" % (subject, (reply + " ") if reply else "", len(data))
        self.send(head.encode() + data + b"\r\n")

    def sub(self, subject, sid):
        self.send(("SUB %s %d\r\n" % (subject, sid)).encode())

    def next_msg(self):
        """The next MSG or HMSG: (subject, reply, status, headers, data)."""
        while True:
            line = self.rf.readline()
            if not line:
                raise EOFError("the server closed the connection")
            if line.startswith(b"PING"):
                self.send(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                raise RuntimeError(line.decode(errors="replace").strip())
            parts = line.decode().split()
            if not parts or parts[0] not in ("MSG", "HMSG"):
                continue  # +OK, PONG, INFO updates
            if parts[0] == "MSG":
                subject, reply = parts[1], (parts[3] if len(parts) == 5 else None)
                hlen, total = 0, int(parts[-1])
            else:
                subject, reply = parts[1], (parts[3] if len(parts) == 6 else None)
                hlen, total = int(parts[-2]), int(parts[-1])
            body = self.rf.read(total + 2)[:total]
            status, headers = None, {}
            if hlen:
                lines = body[:hlen].decode().split("\r\n")
                first = lines[0].split(" ", 2)  # NATS/1.0 [code [description]]
                if len(first) > 1:
                    status = int(first[1])
                for h in lines[1:]:
                    if ":" in h:
                        k, v = h.split(":", 1)
                        headers[k.strip()] = v.strip()
            return subject, reply, status, headers, body[hlen:]


def handle(job):
    """The node's work: what it returns is the outcome envelope."""
    payload = job.get("payload") or {}
    inputs = (payload.get("structured") or {}).get("messages") or []
    text = payload.get("message") or " ".join(m.get("text", "") for m in inputs)
    return {
        "id": job["id"],
        "kind": "outcome",
        "outcome": {"status": "success"},
        "payload": {"message": text.upper()},
        "contextUpdates": [{"key": "worker.language", "value": "python"}],
    }


class Heartbeat:
    """In-progress acks (+WPI) every few seconds while a job runs, so
    JetStream does not give it to another worker (its AckWait is 30 s by
    default)."""

    def __init__(self, conn, ack, every):
        self.conn, self.ack, self.every = conn, ack, every
        self.done = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.done.wait(self.every):
            self.conn.pub(self.ack, b"+WPI")

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.t.join()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nats", default=os.environ.get("SWITCHYARD_NATS", "nats://127.0.0.1:4222"))
    ap.add_argument("--token", default=os.environ.get("SWITCHYARD_TOKEN"))
    ap.add_argument("--user", default=os.environ.get("SWITCHYARD_USER"))
    ap.add_argument("--password", default=os.environ.get("SWITCHYARD_PASSWORD"))
    ap.add_argument("--pool", default="default")
    args = ap.parse_args()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    conn = Conn(args.nats, args.token, args.user, args.password)
    inbox = "_INBOX." + uuid.uuid4().hex
    conn.sub(inbox + ".*", 1)
    print("raw worker: pool %s on %s" % (args.pool, args.nats), file=sys.stderr, flush=True)
    n = 0

    def request(subject, body):
        nonlocal n
        n += 1
        reply = "%s.%d" % (inbox, n)
        conn.pub(subject, body, reply)
        while True:
            msg = conn.next_msg()
            if msg[0] == reply:
                return msg

    # The pool's consumer is made by the first session that sends it a job
    # (or by a switchyard worker): wait for it.
    while not stop.is_set():
        _, _, status, _, data = request("$JS.API.CONSUMER.INFO.%s.pool_%s" % (STREAM, args.pool), b"")
        if status is None and "error" not in json.loads(data):
            break
        time.sleep(0.5)
    while not stop.is_set():
        n += 1
        reply = "%s.%d" % (inbox, n)
        # One job, or a 408 status after 2 s without one.
        conn.pub("$JS.API.CONSUMER.MSG.NEXT.%s.pool_%s" % (STREAM, args.pool),
                 json.dumps({"batch": 1, "expires": 2_000_000_000}).encode(), reply)
        while True:
            subject, ack, status, headers, data = conn.next_msg()
            # A status (408: no job before expires) comes on the request's
            # reply subject; a job keeps the subject it was published on.
            if subject == reply or (status is None and subject.startswith("syw.")):
                break
        if status is not None:
            if status == 503:  # no consumer yet: the pool has had no job
                time.sleep(1)
            continue  # 404 / 408: nothing to do yet
        job = json.loads(data)
        print("raw worker: job started job=%s node=%s" % (job["id"], job.get("toNode")), file=sys.stderr, flush=True)
        with Heartbeat(conn, ack, 10):
            out = handle(job)
        # The outcome first, stored by the outcome stream (the request's
        # answer is JetStream's acknowledgement; a 503 status: no outcome
        # stream, the publish still reached the owner), then the ack: an
        # owner that finds the job gone from the work stream finds its
        # outcome.
        request(headers["Sy-Reply"], json.dumps(out).encode())
        conn.pub(ack, b"+ACK")
        print("raw worker: job done job=%s" % job["id"], file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
