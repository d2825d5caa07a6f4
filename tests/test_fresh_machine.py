"""What a fresh clone on any x86 CPU must give: quiet commands, the API at the top of the package,
no import cycle under the command line, and INT8 targets that stay batch-invariant whatever BLAS
code path the CPU gets.
"""

import ast, os, subprocess, sys, textwrap
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(args, env=None, timeout=300):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=dict(os.environ, **(env or {})))


@pytest.mark.parametrize(
    "cmd",
    [
        [str(BIN / "flashspec"), "--help"], [sys.executable, "-m", "flashspec", "--help"],
        [sys.executable, "-c", "import flashspec.drafters.slice, flashspec.quant"]])
def test_commands_and_imports_print_nothing_to_stderr(cmd):
    r = run(cmd)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", f"{cmd} wrote to stderr:\n{r.stderr}"


def test_python_m_is_the_console_script():
    a, b = run([str(BIN / "flashspec"), "bench", "--help"]), run(
        [sys.executable, "-m", "flashspec", "bench", "--help"])
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout


def test_main_api_at_the_top_of_the_package():
    import flashspec as f
    for name in (
        "load_target", "slice_draft", "load_distilled_draft", "generate", "TreeConfig", "Sampling",
        "Drafter", "ModelDrafter", "PromptLookupDrafter", "MergedDrafter", "quantize_target",
        "bench",
    ):
        obj = getattr(f, name)
        assert obj.__doc__ and obj.__doc__.strip(), f"flashspec.{name} has no docstring"
    assert set(f.__all__) <= set(dir(f))
    out, st = f.generate(_tiny(), None, [5, 6, 7], 4, eos_token_id=[])
    assert len(out) == 4 and st.new_tokens == 4


def _tiny():
    from flashspec.target import tiny_llama
    return tiny_llama()


def test_the_command_line_is_the_top_of_the_house():
    """No module of the library imports `flashspec.cli` (only `__main__` does): the CLI sits above
    everything."""
    for py in (ROOT / "flashspec").glob("*.py"):
        if py.name == "__main__.py": continue
        for node in ast.walk(ast.parse(py.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = (node.module or "")
                assert not (
                    mod in ("cli", "flashspec.cli") or mod.endswith(".cli")
                ), f"{py.name} imports the CLI"


# A tiny target quantized per method; speculative greedy output against the quantized target's own
# plain and Hugging Face greedy output, with the verdict of quantize_target's batch-invariance
# check.
_CHECK = textwrap.dedent("""
    import json, torch, warnings
    from flashspec.target import tiny_llama
    from flashspec.drafters.slice import slice_draft
    from flashspec.tree import TreeConfig
    from flashspec.decode.loop import speculate as generate
    from flashspec.quant import quantize_target
    out = {}
    for m in ("int8-rowwise", "torchao-int8-dynamic", "bnb-int8"):
        t = tiny_llama(); d = slice_draft(t, 2)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always"); quantize_target(t, m)
        g = torch.Generator().manual_seed(1); same = []
        for _ in range(3):
            ids = torch.randint(4, 128, (12,), generator=g).tolist()
            plain, _ = generate(t, None, ids, 24, eos_token_id=[])
            hf = t.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                            eos_token_id=None, pad_token_id=0)[0, 12:].tolist()
            tree, _ = generate(t, d, ids, 24, tree=TreeConfig(3, 2), eos_token_id=[])
            same.append(plain == hf and tree == plain)
        out[m] = dict(invariant=t.flashspec_batch_invariant, gap=t.flashspec_batch_gap, same=same,
                      warned=[str(w.message) for w in seen if "batch-invariant" in str(w.message)])
    print(json.dumps(out))
""")


@pytest.mark.parametrize(
    "env", [{}, {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}], ids=["native", "mkl-avx2"])
def test_int8_targets_stay_batch_invariant(env):
    """MKL_ENABLE_INSTRUCTIONS=AVX2 gives MKL the code path it takes on AMD CPUs, where a matrix
    product of 8 rows summed a row differently from a product of 1 row (so int8-rowwise lost batch
    invariance there).
    """
    import json
    r = run([sys.executable, "-c", _CHECK], env)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    for m, x in res.items():
        assert x["invariant"] and not x["warned"], (m, x)
        # speculative == the quantized target's own greedy output == HF's
        assert all(x["same"]), (m, x)


_EXACT = textwrap.dedent("""
    import torch
    from torch import nn
    from flashspec.quant import Int8Linear, int8_product_saturates
    lin = nn.Linear(576, 64); q = Int8Linear(lin)
    x = torch.randint(-127, 128, (8, 576), dtype=torch.int8); x[0] = 127; x[1] = -127
    w = q.qweight.clone(); w[0] = q.qmax; w[1] = -q.qmax
    exact = torch.equal(torch._int_mm(x, w.t()).long(), x.long() @ w.long().t())
    print(int8_product_saturates(), q.qmax, exact)
""")


@pytest.mark.parametrize("env", [{}, {"ONEDNN_MAX_CPU_ISA": "AVX2"}], ids=["native", "onednn-avx2"])
def test_int8_products_are_exact(env):
    """Without VNNI (oneDNN limited to AVX2 here) int8 products saturate at full range; Int8Linear
    then keeps ±63."""
    r = run([sys.executable, "-c", _EXACT], env)
    assert r.returncode == 0, r.stderr
    saturates, qmax, exact = r.stdout.split()
    assert exact == "True", r.stdout
    assert qmax == ("63" if saturates == "True" else "127")
