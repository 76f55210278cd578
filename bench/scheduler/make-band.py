#!/usr/bin/env python3
"""A "helix" pairwise Markov network as a UAI MARKOV file: N variables of domain D in a line,
a factor on each neighbour pair (X_i, X_i+1) and on each pair K apart (X_i, X_i+K), plus a unary
factor per variable (random positive tables, fixed seed). It is a K-column grid wound into a
spiral: eliminated from its ends (min-fill does), it gives chains of buckets over about K+1
variables that sum out one variable from a message of D^K entries and two small factors. The
intermediate tables are large and each bucket does little work per entry, so moving a table
between the CPU and the GPU costs about as much as computing it: where the comm-aware schedule
(paper 001 Fig. 4) should beat greedy: give it to `kinfer schedule-compare`.
usage: make-band.py N D K SEED > helix.uai"""
import random
import sys

n, d, k, seed = (int(a) for a in sys.argv[1:5])
rng = random.Random(seed)
factors = [[i] for i in range(n)]
factors += [[i, i + 1] for i in range(n - 1)]
factors += [[i, i + k] for i in range(n - k)]
out = ["MARKOV", str(n), " ".join([str(d)] * n), str(len(factors))]
out += [f"{len(f)} " + " ".join(map(str, f)) for f in factors]
for f in factors:
    size = d ** len(f)
    out += ["", str(size), " ".join(f"{rng.uniform(0.5, 1.5):.6f}" for _ in range(size))]
print("\n".join(out))
