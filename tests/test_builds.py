"""The kernel gives the same bits on every instruction set: tests/kernel_bits.c (each product kind,
whole layers in every format, a tiny target's logits and argmax, expf) built for each one this host
can run (AVX-512, AVX2, portable C without FMA instructions, and AArch64 NEON cross-compiled and run
under qemu-user), every section's hash equal to the native build's. .ci/run installs `qemu-user` and
`gcc-aarch64-linux-gnu`; where they are missing the NEON build is skipped with that reason."""
import platform, shutil, subprocess
from pathlib import Path
import pytest
from flashspec.kernel.build import CSRC, KERNEL_FLAGS, c_compiler
from flashspec.util import cpuinfo

HARNESS = Path(__file__).parent/"kernel_bits.c"
# the kernel's options, less those of a shared library
FLAGS = tuple(f for f in KERNEL_FLAGS if f not in ("-shared", "-fPIC", "-march=native"))
X86 = platform.machine() in ("x86_64", "AMD64")

def host_flags() -> set:
    "This CPU's feature flags (x86 `flags`, ARM `Features`)."
    ci = cpuinfo()
    return set((ci.get("flags", "") or ci.get("Features", "")).split())

def builds() -> dict:
    "name -> (compiler, options, runner prefix) of every build this host can run."
    cc, have = c_compiler(), host_flags()
    out = {"native": (cc, ("-march=native", *FLAGS), ())}
    if X86:
        if "avx512f" in have: out["avx2"] = (cc, ("-march=native", "-mno-avx512f", *FLAGS), ())
        out["portable"] = (cc, ("-march=x86-64", "-mtune=generic", *FLAGS), ())  # SSE2, no FMA
        gcc, qemu = shutil.which("aarch64-linux-gnu-gcc"), shutil.which("qemu-aarch64")
        if gcc and qemu:
            out["neon"] = (gcc, ("-march=armv8-a", "-static", *FLAGS), (qemu,))
    return out

def run_build(name, cc, flags, prefix, d:Path, csrc:Path=CSRC) -> dict:
    """The harness built with `flags` over the kernel's sources in `csrc`, and run: `{section:
    hash}`, with `isa` the lanes it used."""
    exe = d/name
    r = subprocess.run([cc, *flags, f"-I{csrc}", str(HARNESS), "-o", str(exe), "-lm"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{name}: {r.stderr[-2000:]}"
    r = subprocess.run([*prefix, str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{name}: {r.stderr[-2000:]}"
    return dict(line.split() for line in r.stdout.splitlines())

@pytest.mark.skipif(c_compiler() is None, reason="no C compiler")
def test_same_bits_on_every_build(tmp_path):
    got = {name: run_build(name, *b, tmp_path) for name, b in builds().items()}
    if X86 and "neon" not in got:
        pytest.skip("qemu-aarch64 or aarch64-linux-gnu-gcc missing: no NEON build"
                    " (Debian: apt-get install qemu-user gcc-aarch64-linux-gnu)")
    ref = got["native"]
    assert len(ref) > 80  # every section printed
    for name, h in got.items():
        diff = sorted(k for k in ref if k != "isa" and h.get(k) != ref[k])
        assert not diff, f"{name} ({h['isa']}) differs from native ({ref['isa']}) at {diff}"
    isas = {h["isa"] for h in got.values()}
    if X86: assert "portable" in isas and ("neon" not in got or "neon" in isas), isas
    if "avx512f" in host_flags(): assert {"avx512", "avx2"} <= isas, isas

@pytest.mark.skipif(c_compiler() is None or not X86, reason="no C compiler, or not x86")
def test_bits_test_can_fail(tmp_path):
    "A portable build whose lanes add unfused products differs: the comparison sees a lost fma."
    src = tmp_path/"csrc"; shutil.copytree(CSRC, src)
    lanes = (src/"lanes.c").read_text()
    fused = "r.v[i] = fmaf(a.v[i], b.v[i], c.v[i]); return r;"
    assert fused in lanes
    (src/"lanes.c").write_text(lanes.replace(fused, "r.v[i] = a.v[i] * b.v[i] + c.v[i]; return r;"))
    cc, flags, prefix = builds()["portable"]
    ok = run_build("ok", cc, flags, prefix, tmp_path)
    bad = run_build("bad", cc, flags, prefix, tmp_path, src)
    assert ok["isa"] == "portable" and sum(ok[k] != bad[k] for k in ok if k != "isa") > 10
