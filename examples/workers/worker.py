#!/usr/bin/env python3
"""A Switchyard worker written with nats-py (pip install nats-py): it serves
the jobs of one pool (nodes with pool=NAME, usually type="remote") by the
protocol of docs/workers.md.

Its node work: the node's prompt (else the text of its inputs) in capitals,
and the context key worker.language=python.

    python3 worker.py --nats nats://127.0.0.1:4222 --token ADMIN --pool py

raw_worker.py next to it is the same worker on the standard library only
(the one the test suite runs).
"""

import argparse
import asyncio
import json
import os
import signal

import nats
from nats.errors import TimeoutError as NatsTimeout


async def handle(job):
    """The node's work: what it returns is the outcome envelope (protojson)."""
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


async def heartbeat(msg, every=10):
    """In-progress acks while the job runs (the pool's AckWait is 30 s)."""
    while True:
        await asyncio.sleep(every)
        await msg.in_progress()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nats", default=os.environ.get("SWITCHYARD_NATS", "nats://127.0.0.1:4222"))
    ap.add_argument("--token", default=os.environ.get("SWITCHYARD_TOKEN"))
    ap.add_argument("--pool", default="default")
    args = ap.parse_args()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    nc = await nats.connect(args.nats, token=args.token)
    js = nc.jetstream()
    # The pool's durable consumer on the work queue SY_WORK: made by the
    # first session that sends the pool a job (or by switchyard worker).
    while True:
        try:
            sub = await js.pull_subscribe_bind("pool_" + args.pool, stream="SY_WORK")
            break
        except Exception:
            if stop.is_set():
                return
            await asyncio.sleep(1)

    while not stop.is_set():
        try:
            msgs = await sub.fetch(1, timeout=2)
        except NatsTimeout:
            continue
        for msg in msgs:
            job = json.loads(msg.data)  # jobs of type=remote nodes are JSON
            beat = asyncio.create_task(heartbeat(msg))
            try:
                out = await handle(job)
            except Exception as e:  # a failed job is a failed outcome
                out = {"id": job["id"], "kind": "outcome",
                       "outcome": {"status": "fail", "failureReason": str(e)}}
            finally:
                beat.cancel()
            # Stored by the outcome stream (JetStream acknowledges it) before
            # the job is acked: an owner that finds the job gone from the
            # work stream finds its outcome; a crash in between runs it again.
            await js.publish(msg.headers["Sy-Reply"], json.dumps(out).encode())
            await msg.ack()
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
