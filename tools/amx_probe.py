"""Would Intel AMX make a tree's extra rows cheap? Times the engine's 4-bit product (`rows_mm_q4`)
against two AMX forms of the same product (`tools/amx_probe.c`: bf16 tiles of the widened weights,
int8 tiles of weights stored a byte each), on random weights of the embedded target's Q4_1 form,
at 1 to 5 rows, 2 threads, and prints a Markdown table (errors against float64, batch invariance,
times). Needs a CPU with AMX (Intel Sapphire Rapids or later) and a C compiler; run from anywhere:
`python tools/amx_probe.py` (read in 04a_kernel, *What a tree's node costs*)."""
import shutil, subprocess, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

def amx_cpu() -> bool:
    "Whether this CPU reports AMX tiles with bf16 and int8 products (Linux `/proc/cpuinfo`)."
    try: flags = Path("/proc/cpuinfo").read_text()
    except OSError: return False
    return all(f in flags for f in ("amx_tile", "amx_bf16", "amx_int8"))

def probe(sizes=((60, 20), (120, 10)), N:int=1536, K:int=576) -> str:
    """A Markdown table: for L products of N x K (`sizes`: (L, repeats)), the best of
    three passes of each form at 1-5 rows, in ms for all L products."""
    from flashspec.kernel import ROWS_SRC, c_compiler
    cc = c_compiler()
    if cc is None: return "No C compiler: the probe cannot run."
    if not amx_cpu(): return "This CPU has no AMX tiles: the probe does not apply."
    with tempfile.TemporaryDirectory() as d:
        (Path(d)/"rows.c").write_text(ROWS_SRC)
        shutil.copy(HERE/"amx_probe.c", Path(d)/"amx_probe.c")
        exe = Path(d)/"probe"
        subprocess.run([cc, "-O3", "-march=native", "-fopenmp", "-Wno-psabi", "amx_probe.c",
                        "-o", str(exe), "-lm"], cwd=d, check=True, capture_output=True)
        rows = ["| products (weights) | rows | 4-bit FMA, engine (ms) | AMX bf16 (ms) |"
                " AMX int8 (ms) |", "| --- | --- | --- | --- | --- |"]
        notes = []
        for L, R in sizes:
            out = subprocess.run([str(exe), str(N), str(K), str(L), str(R)], check=True,
                                 capture_output=True, text=True).stdout.split("\n")
            err = [float(v) for v in out[0].split()[1:]]
            alone = out[1].split()[1:]
            if not notes:
                same = " / ".join("yes" if a == "1" else "no" for a in alone)
                notes.append(f"largest error over sum |x w| against float64 (5 rows): engine"
                             f" {err[0]:.2g}, bf16 {err[1]:.2g}, int8 {err[2]:.2g}; a row alone"
                             f" the same bits as in 5 (engine / bf16 / int8): {same}")
            for line in out[2:]:
                if not line.startswith("rows"): continue
                _, m, a, b, c = line.split()
                rows.append(f"| {L} of {N} x {K} ({L * N * K / 1e6:.0f} M) | {m} | {float(a):.2f}"
                            f" | {float(b):.2f} | {float(c):.2f} |")
    return notes[0] + "\n\n" + "\n".join(rows)

if __name__ == "__main__": print(probe())
