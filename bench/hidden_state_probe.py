"""What the learned head's features cost and carry (docs/quality.md, "Why read through the output layer").

    .venv/bin/python bench/hidden_state_probe.py MODEL.gguf     # splits from TRIAGE_SPLITS (/tmp/triage-quality/splits)

1. Per ticket, fanout with the stable block resident: llama.cpp's embeddings off, on, off again (6 tickets:
   3 cfpb, 3 airline); and a second decode of 5 answer tokens after a 400-token prefix, embeddings off and on.
2. 3,000 positions of issue-kind text decoded once with embeddings on: how well the logits of the head's
   token set (2 x n_embd evenly spaced ids) and the hidden state predict each other (held-out R^2).
Uses the engine's native context directly; a measurement, not product code.
"""

import json
import os
import statistics
import sys
import time

import llama_cpp
import numpy as np

from triage.domain.pack import default_pack
from triage.model.native import Seq
from triage.scoring.engine import Engine, ScoreOptions

MODEL = sys.argv[1]
SPLITS = os.environ.get("TRIAGE_SPLITS", "/tmp/triage-quality/splits")
eng = Engine(MODEL, n_ctx=2048, threads=2)
n = eng.native
pack = default_pack()
rows = [json.loads(line) for line in open(f"{SPLITS}/cfpb-product/dev.jsonl")][:3]
rows += [json.loads(line) for line in open(f"{SPLITS}/airline-sentiment/dev.jsonl")][:3]
texts = [r["text"][:1500] for r in rows]
opts = ScoreOptions()
eng.score_ticket("warm up", pack, opts)


def timeit(label):
    ts = []
    for t in texts:
        t0 = time.perf_counter()
        eng.score_ticket(t, pack, opts)
        ts.append((time.perf_counter() - t0) * 1000)
    return ts


off1 = timeit("off")
llama_cpp.llama_set_embeddings(n.ctx, True)
on = timeit("on")
llama_cpp.llama_set_embeddings(n.ctx, False)
off2 = timeit("off")
print(
    "per ticket ms off:",
    [round(x) for x in off1],
    "on:",
    [round(x) for x in on],
    "off again:",
    [round(x) for x in off2],
)
ratio = [b / ((a + c) / 2) for a, b, c in zip(off1, on, off2, strict=True)]
print("embeddings on / off, per ticket:", [round(r, 3) for r in ratio], "median", round(statistics.median(ratio), 3))

# Cost of a second small decode: K single tokens, one per sequence, after a prefix.
eng.clear()
toks = eng.tokenizer.encode(" ".join(texts))[:400]
n.decode([Seq("p", 0, 0, tuple(toks))])
small = []
for emb in (False, True):
    llama_cpp.llama_set_embeddings(n.ctx, emb)
    ts = []
    for _rep in range(5):
        for k in range(1, 6):
            n.seq_cp(0, k, -1, -1)
        t0 = time.perf_counter()
        n.decode([Seq(k, k, len(toks), (toks[k],)) for k in range(1, 6)])
        ts.append((time.perf_counter() - t0) * 1000)
        for k in range(1, 6):
            n.seq_rm(k, -1, -1)
    small.append(statistics.median(ts))
llama_cpp.llama_set_embeddings(n.ctx, False)
print("second decode of 5 answer tokens after a 400-token prefix, ms (emb off, on):", [round(x, 1) for x in small])

# (2) logits on a fixed token set as a linear image of the hidden state.
d = int(llama_cpp.llama_model_n_embd(n.model))
V = n.n_vocab
S = np.linspace(0, V - 1, 2 * d).astype(int)
eng.clear()
llama_cpp.llama_set_embeddings(n.ctx, True)
allt = eng.tokenizer.encode("\n".join(json.loads(line)["text"] for line in open(f"{SPLITS}/issue-kind/dev.jsonl")))[
    :3000
]
H, L = [], []
pos = 0
for i in range(0, len(allt), 500):
    part = allt[i : i + 500]
    if pos + len(part) > 2000:
        n.seq_rm(0, -1, -1)
        pos = 0
    b = n._batch
    for j, t in enumerate(part):
        b.token[j] = t
        b.pos[j] = pos + j
        b.n_seq_id[j] = 1
        b.seq_id[j][0] = 0
        b.logits[j] = True
    b.n_tokens = len(part)
    assert llama_cpp.llama_decode(n.ctx, b) == 0
    for j in range(len(part)):
        H.append(np.ctypeslib.as_array(llama_cpp.llama_get_embeddings_ith(n.ctx, j), shape=(d,)).copy())
        L.append(np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(n.ctx, j), shape=(V,)).copy()[S])
    pos += len(part)
llama_cpp.llama_set_embeddings(n.ctx, False)
H, L = np.array(H), np.array(L)
m = len(H)
tr = int(m * 0.7)
print("positions", m, "n_embd", d, "|S|", len(S))
# logits_S ~ H W^T (no bias): how linear?
W, *_ = np.linalg.lstsq(H[:tr], L[:tr], rcond=None)
res = L[tr:] - H[tr:] @ W
print("logits_S from h: held-out R2", 1 - res.var() / L[tr:].var())
# h from logits_S: invertible?
P, *_ = np.linalg.lstsq(L[:tr], H[:tr], rcond=None)
res = H[tr:] - L[tr:] @ P
print(
    "h from logits_S: held-out R2",
    1 - res.var() / H[tr:].var(),
    "rel err",
    np.linalg.norm(res) / np.linalg.norm(H[tr:]),
)
sv = np.linalg.svd(W, compute_uv=False)
print("singular values of the fitted map: max", sv[0], "min", sv[-1], "cond", sv[0] / sv[-1])
