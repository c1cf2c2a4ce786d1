"""What strict decoding (webhook.server.decode_json: UTF-8 only, no NaN/Infinity, finite floats,
lone surrogates replaced) costs next to plain ``json.loads``, on an example review and on a
review padded to the 3 MiB body limit (with and without surrogate escapes, which trigger the
walk). Prints milliseconds per decode; no assertions.

    /work/main/.venv/bin/python bench/bench_decode.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from webhook.server import decode_json  # noqa: E402

from test_admission import job, review  # noqa: E402


def per_call_ms(fn, arg, min_time: float = 0.5) -> float:
    n, t0 = 0, time.perf_counter()
    while True:
        fn(arg)
        n += 1
        dt = time.perf_counter() - t0
        if dt >= min_time:
            return dt / n * 1000.0


def main() -> None:
    small = json.dumps(review(job(64))).encode()
    big_doc = review(job(64))
    big_doc["request"]["object"]["metadata"]["annotations"] = {f"k{i}": "v" * 1000 for i in range(3000)}
    big = json.dumps(big_doc).encode()
    big_sur = big.replace(b'"k1": "v', b'"k1": "\\ud800v', 1)
    print(f"{'body':<28}{'bytes':>10}{'json.loads ms':>16}{'decode_json ms':>16}")
    for name, body in (("Job review", small), ("3 MiB review", big), ("3 MiB review, a surrogate", big_sur)):
        a = per_call_ms(json.loads, body)
        b = per_call_ms(decode_json, body)
        print(f"{name:<28}{len(body):>10}{a:>16.3f}{b:>16.3f}")


if __name__ == "__main__":
    main()
