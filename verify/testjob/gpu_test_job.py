#!/usr/bin/env python3
"""gpupolicy's GPU test job: the lab's smallest GPU job.

It does two pieces of work on the GPU and checks each against a CPU
reference computed in float64:

  1. a 4096x4096 float32 matrix multiply, C = A @ B;
  2. the forward pass of a tiny in-process language model (a 2-layer
     decoder-only transformer, vocabulary 256, width 128, 4 heads, context
     64, fixed seed 0), batch 8.

Error bounds (TF32 is switched off, so float32 stays float32):

  matmul_rel_err = max|C - C_ref| / max|C_ref|      must be <= 1e-3
  lm_rel_err     = max|L - L_ref| / max|L_ref|      must be <= 1e-3

where C_ref and the reference logits L_ref are computed on the CPU in
float64 from the same inputs and weights. Float32 with a 4096-long inner
product gives errors near 1e-6; TF32 would give about 1e-3, so the bound
also catches a card that silently runs TF32.

It prints ONE JSON line on stdout:

  {"device": "cuda", "start": <unix s>, "end": <unix s>, "matmul_s": ...,
   "lm_s": ..., "matmul_rel_err": ..., "lm_rel_err": ..., "ok": true, ...}

"start" is stamped once Python, PyTorch and CUDA are up, "end" once both
checks are done; "launched" is the interpreter's first line. Then it holds
the GPU idle (its CUDA context and tensors stay allocated) for --hold
seconds (default: $GPUPOLICY_TEST_HOLD, else 0), and exits 0; it exits 1
if a check failed (after printing the JSON line, without holding) and 2 on
bad arguments.

Without a CUDA device it runs the same work on the CPU (float32 against
float64) and says so: "device": "cpu", "note": "no CUDA device; CPU path".
--matmul-n shrinks the matrix (the JSON says which size ran); it exists to
keep CPU-only tests fast, and verify never passes it.

Two faults, for `gpupolicy verify --faults` (a job that goes wrong beside
others; the JSON line is printed before either takes effect):

  --crash-after S   crash S seconds after the checks, instead of holding
                    for --hold: an uncaught exception, so Python exits 1
                    (CRASH_EXIT_CODE) with a traceback;
  --allocate-mib N  after the checks, allocate N MiB more on the GPU and
                    keep it through the hold: a job using more GPU memory
                    than it declared, which time-slicing does not stop.
                    "allocated_extra_mib" says what was allocated; on the
                    CPU path nothing is ("alloc_note" says so). A failed
                    allocation (out of memory) gives "alloc_error" and
                    "ok": false in the line, and exit 1.
"""

import time

LAUNCHED = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402

MATMUL_N = 4096
MATMUL_BOUND = 1e-3
LM_BOUND = 1e-3

LM_VOCAB = 256
LM_WIDTH = 128
LM_HEADS = 4
LM_LAYERS = 2
LM_CONTEXT = 64
LM_BATCH = 8
SEED = 0

HOLD_ENV = "GPUPOLICY_TEST_HOLD"
CRASH_EXIT_CODE = 1


class Crash(RuntimeError):
    """The crash --crash-after asks for."""


def parse_seconds(text):
    """Seconds from "60", "60.5", "60s", "1m30s" or "2m"."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, num = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    i = 0
    while i < len(text):
        c = text[i]
        if c.isdigit() or c == ".":
            num += c
        elif c in units and num:
            if c == "m" and text[i + 1:i + 2] == "s":
                total += float(num) / 1000.0
                i += 1
            else:
                total += float(num) * units[c]
            num = ""
        else:
            raise ValueError("not a duration: %r" % text)
        i += 1
    if num:
        raise ValueError("not a duration: %r (missing unit)" % text)
    return total


def seconds_flag(flag, text):
    """A flag's duration in seconds (parse_seconds), not negative."""
    try:
        v = parse_seconds(text)
    except ValueError as e:
        raise ValueError("%s: %s" % (flag, e))
    if v < 0:
        raise ValueError("%s must not be negative" % flag)
    return v


def rel_err(got, ref):
    """max|got - ref| / max|ref|, both compared in float64 on the CPU."""
    got = got.detach().to("cpu", dtype=ref.dtype)
    denom = ref.abs().max().item()
    return (got - ref).abs().max().item() / (denom if denom > 0 else 1.0)


def lm_params(torch, generator):
    """The tiny LM's weights, float64 on the CPU, from a fixed seed."""

    def w(*shape, scale=None):
        fan_in = shape[0] if len(shape) > 1 else shape[0]
        s = scale if scale is not None else 1.0 / math.sqrt(fan_in)
        return torch.randn(*shape, generator=generator, dtype=torch.float64) * s

    p = {
        "tok": w(LM_VOCAB, LM_WIDTH, scale=0.5),
        "pos": w(LM_CONTEXT, LM_WIDTH, scale=0.1),
        "lnf_g": 1.0 + w(LM_WIDTH, scale=0.05),
        "lnf_b": w(LM_WIDTH, scale=0.05),
    }
    for i in range(LM_LAYERS):
        p["l%d.ln1_g" % i] = 1.0 + w(LM_WIDTH, scale=0.05)
        p["l%d.ln1_b" % i] = w(LM_WIDTH, scale=0.05)
        p["l%d.qkv" % i] = w(LM_WIDTH, 3 * LM_WIDTH)
        p["l%d.proj" % i] = w(LM_WIDTH, LM_WIDTH)
        p["l%d.ln2_g" % i] = 1.0 + w(LM_WIDTH, scale=0.05)
        p["l%d.ln2_b" % i] = w(LM_WIDTH, scale=0.05)
        p["l%d.fc1" % i] = w(LM_WIDTH, 4 * LM_WIDTH)
        p["l%d.fc2" % i] = w(4 * LM_WIDTH, LM_WIDTH)
    return p


def lm_forward(torch, p, tokens):
    """Logits of a pre-norm decoder-only transformer with tied embeddings."""
    F = torch.nn.functional
    b, t = tokens.shape
    h = p["tok"][tokens] + p["pos"][:t]
    head = LM_WIDTH // LM_HEADS
    mask = torch.ones(t, t, dtype=torch.bool, device=tokens.device).triu(1)
    for i in range(LM_LAYERS):
        x = F.layer_norm(h, (LM_WIDTH,), p["l%d.ln1_g" % i], p["l%d.ln1_b" % i])
        q, k, v = (x @ p["l%d.qkv" % i]).split(LM_WIDTH, dim=-1)
        q, k, v = (z.view(b, t, LM_HEADS, head).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(head)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, LM_WIDTH)
        h = h + y @ p["l%d.proj" % i]
        x = F.layer_norm(h, (LM_WIDTH,), p["l%d.ln2_g" % i], p["l%d.ln2_b" % i])
        h = h + F.gelu(x @ p["l%d.fc1" % i]) @ p["l%d.fc2" % i]
    h = F.layer_norm(h, (LM_WIDTH,), p["lnf_g"], p["lnf_b"])
    return h @ p["tok"].T


def main(argv):
    ap = argparse.ArgumentParser(
        description="gpupolicy GPU test job: matmul + tiny LM, checked against a CPU reference")
    ap.add_argument("--hold", default=None,
                    help="hold the GPU idle this long after the work, in seconds or as 1m30s "
                         "(default: $%s, else 0)" % HOLD_ENV)
    ap.add_argument("--cpu", action="store_true", help="use the CPU path even if CUDA is present")
    ap.add_argument("--matmul-n", type=int, default=MATMUL_N,
                    help="matrix size (default %d; smaller only to keep CPU tests fast)" % MATMUL_N)
    ap.add_argument("--crash-after", default=None,
                    help="crash (uncaught exception, exit %d) this long after the checks instead of holding, in seconds or as 1m30s"
                         % CRASH_EXIT_CODE)
    ap.add_argument("--allocate-mib", type=int, default=0,
                    help="after the checks, allocate this many MiB more on the GPU and keep them through the hold")
    args = ap.parse_args(argv)
    hold_text = args.hold if args.hold is not None else os.environ.get(HOLD_ENV, "0")
    try:
        hold = seconds_flag("--hold", hold_text)
        crash_after = None if args.crash_after is None else seconds_flag("--crash-after", args.crash_after)
    except ValueError as e:
        print("gpu_test_job: %s" % e, file=sys.stderr)
        return 2
    if args.matmul_n < 1:
        print("gpu_test_job: --matmul-n must be positive", file=sys.stderr)
        return 2
    if args.allocate_mib < 0:
        print("gpu_test_job: --allocate-mib must not be negative", file=sys.stderr)
        return 2
    n = args.matmul_n

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if hasattr(torch, "set_float32_matmul_precision"):
        torch.set_float32_matmul_precision("highest")

    out = {}
    if torch.cuda.is_available() and not args.cpu:
        dev = torch.device("cuda")
        torch.cuda.init()
        torch.cuda.synchronize()
        out["device"] = "cuda"
        out["device_name"] = torch.cuda.get_device_name(0)
    else:
        dev = torch.device("cpu")
        out["device"] = "cpu"
        out["note"] = "no CUDA device; CPU path" if not args.cpu else "CPU path requested (--cpu)"

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    start = time.time()
    g = torch.Generator().manual_seed(SEED)

    # 1. Matrix multiply.
    a64 = torch.randn(n, n, generator=g, dtype=torch.float64)
    b64 = torch.randn(n, n, generator=g, dtype=torch.float64)
    a = a64.to(dev, torch.float32)
    b = b64.to(dev, torch.float32)
    sync()
    t0 = time.perf_counter()
    c = a @ b
    sync()
    matmul_s = time.perf_counter() - t0
    c_ref = a.to("cpu", torch.float64) @ b.to("cpu", torch.float64)
    matmul_err = rel_err(c, c_ref)
    del c_ref, a64, b64

    # 2. Tiny language model forward pass.
    p64 = lm_params(torch, g)
    tokens = torch.randint(0, LM_VOCAB, (LM_BATCH, LM_CONTEXT), generator=g)
    p32 = {k: v.to(dev, torch.float32) for k, v in p64.items()}
    tok_dev = tokens.to(dev)
    sync()
    t0 = time.perf_counter()
    with torch.no_grad():
        logits = lm_forward(torch, p32, tok_dev)
    sync()
    lm_s = time.perf_counter() - t0
    with torch.no_grad():
        logits_ref = lm_forward(torch, p64, tokens)
    lm_err = rel_err(logits, logits_ref)
    end = time.time()

    ok = (matmul_err <= MATMUL_BOUND and lm_err <= LM_BOUND
          and math.isfinite(matmul_err) and math.isfinite(lm_err))
    out.update({
        "launched": round(LAUNCHED, 6),
        "start": round(start, 6),
        "end": round(end, 6),
        "matmul_n": n,
        "matmul_s": round(matmul_s, 6),
        "matmul_rel_err": matmul_err,
        "matmul_bound": MATMUL_BOUND,
        "lm": "decoder-only transformer, %d layers, width %d, %d heads, vocab %d, context %d, batch %d, seed %d"
              % (LM_LAYERS, LM_WIDTH, LM_HEADS, LM_VOCAB, LM_CONTEXT, LM_BATCH, SEED),
        "lm_s": round(lm_s, 6),
        "lm_rel_err": lm_err,
        "lm_bound": LM_BOUND,
        "tf32": False,
        "torch": torch.__version__,
        "host": socket.gethostname(),
        "hold_s": hold,
        "ok": ok,
    })
    if crash_after is not None:
        out["crash_after_s"] = crash_after
    extra = None
    if args.allocate_mib > 0:
        if dev.type == "cuda":
            try:
                # Touched, so the memory is really taken on the card.
                extra = torch.ones(args.allocate_mib * 2**20, dtype=torch.uint8, device=dev)
                sync()
                out["allocated_extra_mib"] = args.allocate_mib
            except RuntimeError as e:
                out["alloc_error"] = str(e).splitlines()[0]
                out["ok"] = ok = False
        else:
            out["alloc_note"] = "no CUDA device: --allocate-mib %d not allocated" % args.allocate_mib
    if dev.type == "cuda":
        out["gpu_mem_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    print(json.dumps(out, sort_keys=True), flush=True)
    if "alloc_error" in out:
        print("gpu_test_job: --allocate-mib %d failed: %s" % (args.allocate_mib, out["alloc_error"]), file=sys.stderr)
        return 1
    if not ok:
        print("gpu_test_job: check failed: matmul_rel_err=%g (bound %g), lm_rel_err=%g (bound %g)"
              % (matmul_err, MATMUL_BOUND, lm_err, LM_BOUND), file=sys.stderr)
        return 1
    if crash_after is not None:
        # Hold the GPU as a running job does, then crash mid-run.
        time.sleep(crash_after)
        raise Crash("gpupolicy test job: crashing %s s after its checks, as --crash-after asks" % crash_after)
    if hold > 0:
        # Keep the CUDA context and the tensors alive: the job holds its share
        # of the card, idle, as the lab's test runs did.
        time.sleep(hold)
        del a, b, c, logits, extra
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
