#!/usr/bin/env bash
# Filing merges calibrations (issue 23): part A's profile (GEMM efficiency, pinned copy
# rate, host AdamW measured) and part C's (attention tables measured over a base that
# still assumes the rest), filed in either order, leave one profile with both, each
# figure with its source (part A's optional GPU rates too); a base's derivation from an assumption never replaces a
# figure derived from a measurement; two runs of one part keep both manifests.
. "$(dirname "$0")/lib.sh"
python3 - <<'PY'
import copy, json, sys
from ci.gpu_campaign import filing

base = {"schema": "megatrain.hardware/1", "name": "h200-128g",
        "gpu": {"gemm_efficiency": 0.6, "peak_tflops": {"bf16": 989}},
        "link": {"h2d_gbps": {"pinned": 55}},
        "host": {"adamw_gbps": {"paper": 60}, "adamw_params_per_s": {"paper": 2.7e9}},
        "sources": {"gpu.gemm_efficiency": "assumed: 0.6", "gpu.peak_tflops": "datasheet",
                    "link.h2d_gbps.pinned": "assumed: 55", "host.adamw_gbps": "assumed: 0.6 x triad",
                    "host.adamw_params_per_s": "derived: adamw_gbps / bytes"}}
A = copy.deepcopy(base)
A["gpu"]["gemm_efficiency"] = 0.834
A["link"]["h2d_gbps"]["pinned"] = 55.35
A["host"]["adamw_gbps"]["paper"] = 114.0
A["host"]["adamw_params_per_s"]["paper"] = 5.18e9
A["sources"].update({"gpu.gemm_efficiency": "measured: gemm", "link.h2d_gbps.pinned": "measured: copy",
                     "host.adamw_gbps": "measured: adamw", "host.adamw_params_per_s": "derived: adamw_gbps / bytes"})
C = copy.deepcopy(base)
C["gpu"]["attention_tflops"] = {"cudnn": [[1024, 300.0], [131072, 560.0]]}
C["sources"]["gpu.attention_tflops.cudnn"] = "measured: attention lab"

fails = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        fails.append(what)

ac, _ = filing.merge_profile(filing.merge_profile(base, A)[0], C)
ca, _ = filing.merge_profile(filing.merge_profile(base, C)[0], A)
check(ac == ca, "A then C and C then A give the same profile")
for name, p in (("A then C", ac), ("C then A", ca)):
    check(p["gpu"]["gemm_efficiency"] == 0.834 and p["sources"]["gpu.gemm_efficiency"].startswith("measured"),
          f"{name}: A's measured GEMM efficiency kept, with its source")
    check(p["gpu"]["attention_tflops"]["cudnn"][1][1] == 560.0, f"{name}: C's attention table kept")
    check(p["host"]["adamw_params_per_s"]["paper"] == 5.18e9,
          f"{name}: the AdamW rate derived from A's measurement, not C's base derivation from an assumption")
    check(p["gpu"]["peak_tflops"]["bf16"] == 989, f"{name}: datasheet figures untouched")
# A later run of A replaces A's figures (the newest measurement wins).
A2 = copy.deepcopy(A)
A2["gpu"]["gemm_efficiency"] = 0.81
A2["sources"]["gpu.gemm_efficiency"] = "measured: gemm, a later run"
later, _ = filing.merge_profile(ac, A2)
check(later["gpu"]["gemm_efficiency"] == 0.81 and later["sources"]["gpu.gemm_efficiency"].endswith("later run"),
      "a later calibration replaces the figure and its source")
check(later["gpu"]["attention_tflops"] == ac["gpu"]["attention_tflops"], "and keeps what it did not measure")
check(filing.merge_profile(None, C)[0] == C, "nothing there yet: the part's profile as it is")
# A figure measured under a key whose parent had one source: the parent's source goes to the
# figures still under it, not to the measured one.
P = copy.deepcopy(base)
P["link"]["h2d_gbps"]["pageable"] = 27.5
P["sources"]["link.h2d_gbps"] = "assumed: both"
P["sources"].pop("link.h2d_gbps.pinned")
Q = copy.deepcopy(P)
Q["link"]["h2d_gbps"]["pinned"] = 55.35
Q["sources"]["link.h2d_gbps.pinned"] = "measured: copy"
m, _ = filing.merge_profile(P, Q)
check("link.h2d_gbps" not in m["sources"] and m["sources"]["link.h2d_gbps.pinned"] == "measured: copy" and
      m["sources"]["link.h2d_gbps.pageable"] == "assumed: both", "a parent's source is split among the figures left under it")
# Part A's optional GPU rates (gemm_bwd_efficiency, kernel_gbps.*, attention_work_tflops.*) filed over
# a profile with C's tables: each lands with its source (rope_bwd's derived from A's rope_fwd); C's stay.
R = copy.deepcopy(A)
R["gpu"].update({"gemm_bwd_efficiency": 0.71, "kernel_gbps": {"rope_fwd": 2800, "rope_bwd": 2800},
                 "attention_work_tflops": {"cudnn": [[671088640, 420.0]]}})
R["sources"].update({"gpu.gemm_bwd_efficiency": "measured: gemm_bwd", "gpu.kernel_gbps.rope_fwd": "measured: kernel",
                     "gpu.kernel_gbps.rope_bwd": "derived: gpu.kernel_gbps.rope_fwd, the same kernel",
                     "gpu.attention_work_tflops.cudnn": "measured: attention by work"})
r, taken = filing.merge_profile(ac, R)
check(r["gpu"]["gemm_bwd_efficiency"] == 0.71 and r["gpu"]["kernel_gbps"] == {"rope_fwd": 2800, "rope_bwd": 2800}
      and r["gpu"]["attention_work_tflops"] == R["gpu"]["attention_work_tflops"]
      and r["sources"]["gpu.kernel_gbps.rope_bwd"].startswith("derived") and "gpu.gemm_bwd_efficiency" in taken
      and r["gpu"]["attention_tflops"] == ac["gpu"]["attention_tflops"],
      "part A's measured GPU rates filed with their sources, beside C's tables")
sys.exit(1 if fails else 0)
PY
rc=$?
[ "$rc" = 0 ] && echo "all checks passed" || { echo "profile merge: checks failed"; exit 1; }
