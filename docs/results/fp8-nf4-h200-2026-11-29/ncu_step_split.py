import csv, sys, re, collections
def load(p):
    lines = [l for l in open(p) if l.startswith('"')]
    return [(r["Kernel Name"], float(r["Metric Value"].replace(",",""))) for r in csv.DictReader(lines) if r.get("Metric Name") == "gpu__time_duration.sum"]
def cat(n):
    n2 = n.lower()
    rules = [("attn", r"cudnn|flash|sdpa|fmha"), ("fp8gemm", r"qqtst|ablk128"), ("quant", r"quantize_rows|quantize_fp8"), ("fp8transp", r"transpose"),
             ("loragemm", r"nvjet_sm90_t.._(32|64|128)x(32|64|128)_|splitk"), ("gemm", r"nvjet|gemm|cutlass|xmma"),
             ("norm", r"rmsnorm"), ("rope", r"rope"), ("act", r"silu|gelu|swiglu"), ("loss", r"cross|entropy|logsumexp|ce_|loss"),
             ("adam", r"adam|grad_sumsq|grad_norm"), ("elt", r".*")]
    for k, pat in rules:
        if re.search(pat, n2): return k
for p in sys.argv[1:]:
    rows = load(p)
    ad = [i for i, (n, _) in enumerate(rows) if "adamw_kernel" in n]
    start = ad[-2] + 1 if len(ad) > 1 else 0
    # the step starts at the first embedding-ish kernel after the previous optimizer; with one step: after the last load kernel
    if len(ad) == 1:
        ld = [i for i, (n, _) in enumerate(rows[:ad[0]]) if "quantize_weight" in n or "FillUniform" in n]
        start = ld[-1] + 1 if ld else 0
    rows = rows[start:ad[-1] + 1]
    tot = sum(t for _, t in rows)
    by = collections.defaultdict(float); cnt = collections.Counter(); byk = collections.defaultdict(float)
    for n, t in rows:
        k = re.sub(r"\(.*", "", n)[:100]
        by[cat(n)] += t; byk[k] += t; cnt[k] += 1
    print(f"== {p}: {len(rows)} kernels (adamw at {ad}), {tot/1e6:.2f} ms")
    for k, v in sorted(by.items(), key=lambda x: -x[1]): print(f"   {k:10s} {v/1e6:8.2f} ms {100*v/tot:5.1f}%")
    for k, v in sorted(byk.items(), key=lambda x: -x[1])[:32]: print(f"      {v/1e6:7.2f} ms x{cnt[k]:4d}  {cat(k):9s} {k}")
