"""The block-FP8 linear that HF transformers' FP8Linear runs, for a machine without the hub.

transformers 5.x has no FP8 matmul of its own: `FP8Linear.forward` calls
`integrations.finegrained_fp8.fp8_linear`, which tries DeepGEMM (sm90+, 128x128
blocks) and then `finegrained_fp8_linear`, whose whole work is one call into
the Triton kernel `kernels-community/finegrained-fp8` (`matmul_2d`) plus the
bias add. Both kernels are downloaded from the HF Hub by the `kernels` package;
where it is missing, the first FP8 forward raises ImportError. (Its
`FineGrainedFP8Config(dequantize=True)` runs bf16 weights without quantised
activations: not the same arithmetic.)

`install()` keeps transformers' own FP8 modules, loading and dispatch, sets
TRANSFORMERS_DISABLE_DEEPGEMM_LINEAR=1 (the Triton path, the one reproduced
here) and wraps `finegrained_fp8_linear` to count its calls. When HF's hub
kernel loads, the wrapper only counts. When it does not, the wrapper computes
what the kernel's block-dynamic path (fp32 weight_scale_inv, [128, 128] blocks,
no static activation scale) computes, in torch:

  per row and 128-column block of the bf16 input x, a_s = max|x| / 448 (fp32);
  codes q = e4m3(x / max(a_s, 1e-12)), rounded to nearest even, saturating;
  acc (fp32) += (dot(q, w_codes over the block) * a_s) * weight_scale_inv,
  block by block along K; output = bf16(acc) (+ bias).

That is the formula, not the kernel's bits: the Triton kernel's fp32
divisions and its tensor-core dot (accumulation order and precision over 128
products) are its own, so a rare activation code or a last bit of the output
can differ. Both are far below FP8's own noise, which the goldens' thresholds
are derived from. Before the model runs, `check_against_reference()` checks the
torch code against a scalar pure-Python transcription of the same formula
(codes and scales bit for bit, the accumulator to fp32 rounding), so a layout
or indexing slip in the vectorised code cannot pass.

The pure-Python parts (e4m3 rounding and decoding, fp32 rounding, the scalar
reference) need no torch; `selftest()` checks them.
"""

import inspect
import math
import os
import struct

BLOCK = 128
E4M3_MAX = 448.0
ACT_SCALE_FLOOR = 1e-12  # the kernel's floor against an all-zero block
DEEPGEMM_SWITCH = "TRANSFORMERS_DISABLE_DEEPGEMM_LINEAR"
HF_LINEAR_PARAMS = ["input", "weight", "weight_scale_inv", "block_size", "bias", "activation_scale"]


class KernelAssumption(RuntimeError):
    """The stand-in does not cover what HF asked of it, or HF's code is not shaped as expected."""


def _require(cond, message):
    if not cond:
        raise KernelAssumption(message)


# --------------------------------------------------------------------------
# Pure Python: the formula on scalars

def f32(x):
    """x rounded to the nearest fp32 value (ties to even)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def e4m3_decode(code):
    """The value of an e4m3fn byte (NaN for 0x7f and 0xff)."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa * 2.0 ** -9
    return sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)


_DECODE = [e4m3_decode(c) for c in range(256)]
_ENCODE = {_DECODE[c]: c for c in range(0x7F) if not math.isnan(_DECODE[c])}  # magnitudes, 0x00..0x7e


def e4m3_round(v):
    """v rounded to e4m3fn: nearest, ties to even, saturating at +-448 (the kernel's satfinite cast)."""
    if math.isnan(v):
        return v
    a = min(abs(v), E4M3_MAX)
    if a == 0.0:
        return math.copysign(0.0, v)
    exponent = max(math.frexp(a)[1] - 1, -6)  # below 2^-6 the subnormal step 2^-9 applies
    step = 2.0 ** (exponent - 3)
    return math.copysign(round(a / step) * step, v)  # a / step is exact; round() ties to even


def e4m3_encode(v):
    """The byte of an e4m3fn value (v must already be representable)."""
    return (0x80 if math.copysign(1.0, v) < 0 else 0) | _ENCODE[abs(v)]


def reference_block_fp8_linear(x_rows, w_codes, w_scales):
    """The kernel's formula on Python floats. x_rows: M rows of K fp32 values;
    w_codes: N rows of K e4m3 bytes; w_scales: N/128 rows of K/128 fp32 values.
    Returns (activation codes M x K, activation scales M x K/128, fp32
    accumulator M x N, the sum of the |products| scaled like the terms M x N, which bounds the
    rounding error of any fp32 summation order)."""
    k = len(x_rows[0])
    n = len(w_codes)
    kb_count = k // BLOCK
    floor = f32(ACT_SCALE_FLOOR)
    w_vals = [[_DECODE[c] for c in row] for row in w_codes]
    codes, scales, acc, mag = [], [], [], []
    for row in x_rows:
        row_codes, row_q, row_s = [], [], []
        for kb in range(kb_count):
            block = row[kb * BLOCK:(kb + 1) * BLOCK]
            s = f32(max(abs(v) for v in block) / E4M3_MAX)
            d = max(s, floor)
            q = [e4m3_round(f32(v / d)) for v in block]  # fp32 quotient of fp32 values: correctly rounded
            row_q.extend(q)
            row_codes.extend(e4m3_encode(v) for v in q)
            row_s.append(s)
        row_acc, row_mag = [], []
        for j in range(n):
            total, total_abs = 0.0, 0.0
            for kb in range(kb_count):
                lo, hi = kb * BLOCK, (kb + 1) * BLOCK
                products = [a * b for a, b in zip(row_q[lo:hi], w_vals[j][lo:hi])]
                # Products of e4m3 values are multiples of 2^-18 below 2^18: this double sum is exact.
                dot = f32(sum(products))
                term = f32(f32(dot * row_s[kb]) * w_scales[j // BLOCK][kb])
                total = f32(total + term)
                total_abs += sum(abs(p) for p in products) * row_s[kb] * w_scales[j // BLOCK][kb]
            row_acc.append(total)
            row_mag.append(total_abs)
        codes.append(row_codes)
        scales.append(row_s)
        acc.append(row_acc)
        mag.append(row_mag)
    return codes, scales, acc, mag


# --------------------------------------------------------------------------
# torch: the same formula, vectorised, for HF's FP8Linear

def _quantise_and_accumulate(x2d, weight, weight_scale_inv):
    import torch
    m, k = x2d.shape
    n = weight.shape[0]
    kb_count = k // BLOCK
    a = x2d.float().view(m, kb_count, BLOCK)
    amax = a.abs().amax(dim=-1)  # (M, KB)
    # A tensor divisor: torch may turn division by a Python scalar into a multiplication by its
    # reciprocal, which is not always the correctly rounded amax / 448 the reference computes.
    a_s = amax / torch.full_like(amax, E4M3_MAX)
    q = (a / a_s.clamp_min(ACT_SCALE_FLOOR).unsqueeze(-1)).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    # (KB, M, 128) x (KB, 128, N): each 128-column block's dot products of exact e4m3 values, in fp32.
    partial = torch.bmm(q.float().transpose(0, 1), weight.float().view(n, kb_count, BLOCK).permute(1, 2, 0))
    b_s = weight_scale_inv.repeat_interleave(BLOCK, dim=0).t()  # (KB, N)
    acc = torch.zeros(m, n, dtype=torch.float32, device=x2d.device)
    for kb in range(kb_count):
        acc = acc + partial[kb] * a_s[:, kb:kb + 1] * b_s[kb][None, :]
    return q.view(m, k), a_s, acc


def block_fp8_linear(input, weight, weight_scale_inv, block_size=None, bias=None, activation_scale=None,
                     output_dtype=None):
    """Drop-in for transformers' finegrained_fp8_linear, block-dynamic FP8 only (see the module docstring)."""
    import torch
    _require(activation_scale is None, "a static activation scale: only dynamic activations are reproduced")
    _require(block_size is not None and [int(b) for b in block_size] == [BLOCK, BLOCK],
             f"block_size {block_size}: only [128, 128] blocks are reproduced")
    _require(weight.dtype == torch.float8_e4m3fn and weight.dim() == 2, f"weight {weight.dtype} {tuple(weight.shape)}")
    n, k = weight.shape
    _require(input.dtype in (torch.bfloat16, torch.float16, torch.float32)
             and input.shape[-1] == k and k % BLOCK == 0 and n % BLOCK == 0,
             f"input {input.dtype} {tuple(input.shape)} against weight {tuple(weight.shape)}")
    _require(weight_scale_inv.dtype == torch.float32
             and tuple(weight_scale_inv.shape) == (n // BLOCK, k // BLOCK),
             f"weight_scale_inv {weight_scale_inv.dtype} {tuple(weight_scale_inv.shape)}: fp32 per 128x128 block")
    _require(not torch.backends.cuda.matmul.allow_tf32, "TF32 matmuls are on: the fp32 block dots would round")
    _require(bool(torch.isfinite(input).all()), "non-finite activations")
    _, _, acc = _quantise_and_accumulate(input.reshape(-1, k), weight, weight_scale_inv)
    out = acc.to(output_dtype or input.dtype).reshape(*input.shape[:-1], n)
    if bias is not None:
        out = out + bias
    return out


def check_against_reference(device, seed=7):
    """The torch code against the scalar reference on a case with two row and column blocks,
    a zero block (the scale floor), large and tiny rows; returns the largest accumulator
    difference relative to its tolerance."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    m, k, n = 4, 2 * BLOCK, 2 * BLOCK
    x = torch.randn(m, k, generator=gen)
    x[1, BLOCK:] = 0.0
    x[2] *= 1000.0
    x[3] *= 1e-3
    x = x.to(torch.bfloat16)
    codes = torch.randint(0, 256, (n, k), generator=gen, dtype=torch.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38  # no NaN codes in a weight
    w_scales = (torch.rand(n // BLOCK, k // BLOCK, generator=gen) * 1e-2 + 1e-3).float()
    q, a_s, acc = _quantise_and_accumulate(x.to(device), codes.to(device).view(torch.float8_e4m3fn),
                                           w_scales.to(device))
    ref_codes, ref_scales, ref_acc, ref_mag = reference_block_fp8_linear(
        x.float().tolist(), codes.tolist(), w_scales.tolist())
    _require(q.view(torch.uint8).cpu().tolist() == ref_codes,
             "the torch activation codes differ from the scalar reference's")
    _require(a_s.cpu().tolist() == ref_scales, "the torch activation scales differ from the scalar reference's")
    worst = 0.0
    for got_row, ref_row, mag_row in zip(acc.cpu().tolist(), ref_acc, ref_mag):
        for got, ref, mag in zip(got_row, ref_row, mag_row):
            tol = 1e-5 * (abs(ref) + mag) + 1e-30
            worst = max(worst, abs(got - ref) / tol)
    _require(worst <= 1.0, f"the torch accumulator is {worst:.2f} tolerances off the scalar reference's")
    out = block_fp8_linear(x.to(device), codes.to(device).view(torch.float8_e4m3fn), w_scales.to(device),
                           [BLOCK, BLOCK])
    _require(torch.equal(out, acc.to(torch.bfloat16)), "block_fp8_linear's output is not bf16(accumulator)")
    return worst


class KernelCalls:
    """Counts the calls of HF's finegrained_fp8_linear (the hub kernel's or the stand-in's)."""

    def __init__(self):
        self.calls = 0

    def reset(self):
        self.calls = 0


def install(hf_fp8, device):
    """Route HF's FP8 linears through finegrained_fp8_linear and count them; compute them here
    when the hub kernel cannot load. Returns (description dict, KernelCalls)."""
    _require(hasattr(hf_fp8, "fp8_linear") and hasattr(hf_fp8, "finegrained_fp8_linear"),
             f"{hf_fp8.__name__} has no fp8_linear / finegrained_fp8_linear: not the transformers 5.x FP8 path")
    original = hf_fp8.finegrained_fp8_linear
    params = list(inspect.signature(original).parameters)
    _require(params[:len(HF_LINEAR_PARAMS)] == HF_LINEAR_PARAMS,
             f"finegrained_fp8_linear takes {params}, expected {HF_LINEAR_PARAMS} first")
    _require("finegrained_fp8_linear(" in inspect.getsource(hf_fp8.fp8_linear),
             "fp8_linear does not call finegrained_fp8_linear")
    loader = getattr(hf_fp8, "load_finegrained_fp8_kernel", None)
    _require(loader is not None, "no load_finegrained_fp8_kernel to probe for the hub kernel")
    try:
        loader()
        hub_error = None
    except ImportError as e:
        hub_error = str(e)
    os.environ[DEEPGEMM_SWITCH] = "1"
    calls = KernelCalls()
    info = {
        "hf_fp8_dispatch": "transformers.integrations.finegrained_fp8: FP8Linear.forward -> fp8_linear -> "
                           "finegrained_fp8_linear",
        "deepgemm_linear": f"off ({DEEPGEMM_SWITCH}=1)",
    }
    if hub_error is None:
        def counted(*args, **kwargs):
            calls.calls += 1
            return original(*args, **kwargs)
        info["hf_fp8_kernel"] = "kernels-community/finegrained-fp8 from the kernels package (HF's own)"
    else:
        worst = check_against_reference(device)
        def counted(*args, **kwargs):
            calls.calls += 1
            return block_fp8_linear(*args, **kwargs)
        info["hf_fp8_kernel"] = ("tools/goldens/hf_fp8_kernel.py: torch replacement of kernels-community/"
                                 "finegrained-fp8's block-dynamic W8A8 linear (same formula, not the same bits), "
                                 "installed as finegrained_fp8_linear")
        info["hub_kernel_error"] = hub_error
        info["replacement_vs_scalar_reference"] = (
            f"activation codes and scales bit-exact, accumulator within {worst:.3f} of its 1e-5 tolerance")
    hf_fp8.finegrained_fp8_linear = counted
    return info, calls


# --------------------------------------------------------------------------

def selftest():
    assert f32(0.1) == 0.10000000149011612
    assert f32(1.0 + 2.0 ** -24) == 1.0 and f32(1.0 + 3 * 2.0 ** -24) == 1.0 + 2.0 ** -22  # ties to even
    assert e4m3_decode(0x7E) == 448.0 and e4m3_decode(0x38) == 1.0 and e4m3_decode(0x01) == 2.0 ** -9
    assert e4m3_decode(0x08) == 2.0 ** -6 and e4m3_decode(0xB8) == -1.0 and math.isnan(e4m3_decode(0xFF))
    finite = [c for c in range(256) if not math.isnan(_DECODE[c])]
    assert len(finite) == 254
    for c in finite:  # every value is its own rounding and encodes to its byte
        assert e4m3_round(_DECODE[c]) == _DECODE[c] and e4m3_encode(_DECODE[c]) == c, c
    assert e4m3_round(1.0625) == 1.0 and e4m3_round(1.1875) == 1.25  # ties to even mantissa
    assert e4m3_round(2.0 ** -10) == 0.0 and e4m3_round(3 * 2.0 ** -10) == 2.0 ** -8  # subnormal ties
    assert e4m3_round(1.97) == 2.0 and e4m3_round(-0.3) == -0.3125
    assert e4m3_round(500.0) == 448.0 and e4m3_round(-1e9) == -448.0 and e4m3_round(470.0) == 448.0
    assert e4m3_encode(-0.0) == 0x80 and e4m3_encode(0.0) == 0x00

    # One row, two column blocks (all ones; all zeros), two row blocks of the weight (all 1.0) with
    # their own scales: the first block quantises to 448 with scale 1/448, the zero block to 0 with
    # scale 0 (its contribution vanishes instead of 0/0).
    x = [[1.0] * BLOCK + [0.0] * BLOCK]
    w = [[0x38] * (2 * BLOCK)] * (2 * BLOCK)
    w_scales = [[0.5, 3.0], [0.25, 7.0]]
    codes, scales, acc, _ = reference_block_fp8_linear(x, w, w_scales)
    assert codes == [[0x7E] * BLOCK + [0x00] * BLOCK], codes[0][:4]
    assert scales == [[f32(1.0 / 448.0), 0.0]]
    # 128 x 448 x (1/448) = 128 per unit of weight scale: 0.5 for the first 128 outputs, 0.25 for the rest.
    assert all(abs(v - 64.0) < 1e-4 for v in acc[0][:BLOCK]) and all(abs(v - 32.0) < 1e-4 for v in acc[0][BLOCK:])
    # A block whose max is 448 has scale 1: the activations round to e4m3 directly.
    x = [[448.0, 1.0625, 1.1875, -3.0] + [0.0] * (BLOCK - 4)]
    codes, scales, acc, _ = reference_block_fp8_linear(x, [[0x38] * BLOCK] * BLOCK, [[2.0]])
    assert scales == [[1.0]] and [_DECODE[c] for c in codes[0][:4]] == [448.0, 1.0, 1.25, -3.0]
    assert acc[0][0] == 2.0 * (448.0 + 1.0 + 1.25 - 3.0)
    print("hf_fp8_kernel selftest ok")
