#!/usr/bin/env bash
# Session 2026-11-29e, call 5: FP8 vs bf16 when each precision gets the checkpointing the planner picks for the
# same memory (checkpointing auto): Llama-3.1-8B 2x2048 under 24 GiB, and one 64k-token sample under 80 GiB.
set -u
O=$OUT/${TAG:-e3}; mkdir -p $O
. tools/gpu-env.sh env
t0=$SECONDS
[ -x build/gpu/app/cli/tandem-cli ] || bash bench/gpu_checks.sh $O/checks .carry/assets build > $O/build.txt 2>&1
echo "build $((SECONDS-t0)) s" >> $O/times.txt
CLI=build/gpu/app/cli/tandem-cli
mkdir -p $O/m && WARMUP=0 timeout 8 bash bench/long_context.sh $CLI $O/m 1 > /dev/null 2>&1
ls $O/m/llama-3.1-8b >> $O/times.txt
python3 - $CLI $O "${SCEN:-[(24, 4096, 2048, 8), (80, 65536, 65536, 3)]}" >> $O/times.txt 2>&1 <<'PY'
import subprocess, sys, re, json, time
cli, o = sys.argv[1], sys.argv[2]
SCEN = eval(sys.argv[3])
for budget, bt, seq, steps in SCEN:
    res = {}
    for p in ["bf16", "fp8"]:
        plan = subprocess.run([cli, "plan", "--model", o + "/m/llama-3.1-8b", "--lora-r", "16", "--checkpointing", "auto",
                               "--device", "cuda", "--vram-budget", str(budget), "--precision", p, "--batch-tokens", str(bt),
                               "--max-seq-len", str(seq)], capture_output=True, text=True, timeout=60).stdout
        open(f"{o}/plan-{budget}-{bt}-{p}.txt", "w").write(plan)
        pol = re.search(r"checkpointing: ([a-z-]+)", plan).group(1)
        args = ["--checkpointing", pol]
        m = re.search(r"keeps the MLP buffers of (\d+) of \d+ layers(?: on the GPU and offloads those of (\d+))?", plan)
        if m:
            args += ["--keep-mlp-layers", m.group(1)]
            if m.group(2): args += ["--offload-mlp-layers", m.group(2)]
        if "the in-house kernels" in plan: args += ["--attention", "inhouse"]
        if p == "fp8" and "transposes stay on the GPU" in plan: args += ["--fp8-transposed"]
        cmd = [cli, "bench", "--config", "llama-3.1-8b", "--batch-tokens", str(bt), "--seq-len", str(seq), "--precision", p,
               "--vram-budget", str(budget), "--warmup", "2", "--steps", str(steps), "--json", f"{o}/b-{budget}-{bt}-{p}.json"] + args
        t = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=170)
        print(" ".join(cmd[1:]), "rc", r.returncode, f"{time.time()-t:.0f} s")
        if r.returncode: print(r.stdout[-600:], r.stderr[-600:]); continue
        j = json.load(open(f"{o}/b-{budget}-{bt}-{p}.json"))
        res[p] = j["tokens_per_s"]
        print(f"  {budget} GiB {p}: {pol} {args}: {j['tokens_per_s']:.0f} tok/s, peak {j['memory']['peak_allocated_bytes']/2**30:.2f} GiB")
    if len(res) == 2: print(f"  {budget} GiB fp8/bf16 = {res['fp8']/res['bf16']:.3f}")
PY
echo "done $((SECONDS-t0)) s" >> $O/times.txt
