"""Memory held by each request waiting in ``triage serve``'s queue, in bytes (tracemalloc), not time.

The server runs in this process (``triage.serve.local.serving``: the app, uvicorn with the
connection limits, the worker) on the scripted engine of tests/fake_engine.py, held at its first
criterion so that every later request waits. ``--n`` requests (default 40) are sent on their own
connections, each with a ticket of ``--chars`` characters; once all wait, the Python memory
allocated since they were sent, divided by ``--n``, is the memory per waiting request (the
connection, the request, the job and its ticket). Run for a short ticket and for the largest
allowed (65,536 bytes of UTF-8, as "é" x 32,768 or "a" x 65,536):

    .venv/bin/python bench/serve_queue_memory.py --json bench/results/serve_queue_memory.json

tests/test_serve_hardening.py checks a bound on the same figure.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def per_waiting_request(text: str, n: int) -> dict[str, Any]:
    from fake_engine import FakeEngine  # the scripted engine: the figure is the server's, not the model's

    from triage.domain.pack import default_pack
    from triage.serve.app import ServeSettings
    from triage.serve.local import serving

    pack = default_pack()
    engine = FakeEngine(hold_after=0)
    with serving(engine, ServeSettings(packs={pack.name: pack})) as (base, worker):
        port = int(base.rsplit(":", 1)[1])

        def send(i: int) -> socket.socket:
            body = json.dumps({"id": f"M-{i}", "text": text}, ensure_ascii=False).encode()
            head = (
                f"POST /v1/score HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(head + body)
            return sock

        socks = [send(-1)]  # the one being scored, held
        while not engine.held.is_set():
            time.sleep(0.01)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            socks += [send(i) for i in range(n)]
            deadline = time.monotonic() + 60
            while worker.waiting < n and time.monotonic() < deadline:
                time.sleep(0.01)
            if worker.waiting != n:
                raise SystemExit(f"only {worker.waiting} of {n} requests are waiting")
            time.sleep(0.2)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
            engine.gate.set()
            for s in socks:
                s.close()
    return {
        "chars": len(text),
        "utf8_bytes": len(text.encode("utf-8")),
        "requests": n,
        "bytes_per_waiting_request": round(held / n),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=40, help="requests waiting (default 40)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    rows = [
        per_waiting_request("Where is my parcel? The tracking page has said in transit for nine days.", args.n),
        per_waiting_request("a" * 65_536, args.n),
        per_waiting_request("é" * 32_768, args.n),
        per_waiting_request("😀" * 16_384, args.n),
    ]
    for r in rows:
        print(
            f"ticket of {r['chars']:>6,} characters ({r['utf8_bytes']:>6,} bytes of UTF-8): "
            f"{r['bytes_per_waiting_request']:>8,} bytes per waiting request ({r['requests']} waiting)"
        )
    if args.json:
        args.json.write_text(json.dumps({"python": sys.version.split()[0], "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
