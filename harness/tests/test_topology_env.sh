#!/usr/bin/env bash
# mt-topology and mt-env: their JSON parses and has the documented keys, on this
# machine and on a fake sysfs tree (2 NUMA nodes, SMT, one NVIDIA GPU on node 1 whose
# link idles at 2.5 GT/s but trains to Gen5 x16, its audio function, a non-NVIDIA
# bridge) with a fake nvidia-smi, where every value is known; and on a hand-written
# Grace Hopper snapshot (harness/tests/data/grace_gh200, see its README).
set -uo pipefail
command -v jq >/dev/null || { echo "skipped: jq not installed"; exit 77; }
BIN=${MT_BIN:-build/bin}
for b in mt-topology mt-env; do [ -x "$BIN/$b" ] || { echo "FAIL: $BIN/$b not built"; exit 1; }; done
export MT_ENV_NO_GIT=1 # never run git from a test (others may be committing)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check NAME JSON JQ-EXPR: the expression must be true
  if printf '%s' "$2" | jq -e "$3" >/dev/null 2>&1; then echo "ok   $1"
  else echo "FAIL $1: $3"; printf '%s\n' "$2" | sed 's/^/    /'; fails=$((fails + 1)); fi
}

# ---- this machine
t=$("$BIN/mt-topology") || { echo "FAIL: mt-topology exited $?"; exit 1; }
check topo_keys "$t" 'keys == (["cores","cpu_model","gpus","host_mem_bytes","numa_nodes","pus","source"])'
check topo_nodes "$t" '(.numa_nodes | length) >= 1 and (.numa_nodes[0] | has("node") and has("cpulist") and has("mem_bytes"))'
check topo_cpus "$t" '.pus >= 1 and .cores >= 1 and .host_mem_bytes > 0'
t=$("$BIN/mt-topology" --source sysfs) || { echo "FAIL: mt-topology --source sysfs"; fails=$((fails + 1)); }
check topo_sysfs "$t" '.source == "sysfs" and .pus >= 1'
node=$(printf '%s' "$t" | jq '[.numa_nodes[] | select(.cpus > 0)][0].node')
t=$("$BIN/mt-topology" --bind "$node") || { echo "FAIL: mt-topology --bind $node"; fails=$((fails + 1)); }
check topo_bind "$t" '(.bound_cpus | length) >= 1'
# Memory is bound on both paths (hwloc when built with it, and the sysfs fallback the GPU
# machine uses): the policy read back holds the node, and a page touched afterwards lands
# there. A container that forbids the memory-policy calls (EPERM/ENOSYS) is said, not failed.
for srcopt in "" "--source sysfs"; do
  t=$("$BIN/mt-topology" $srcopt --bind "$node") || { echo "FAIL: mt-topology $srcopt --bind $node"; fails=$((fails + 1)); continue; }
  if printf '%s' "$t" | jq -e '.memory_bound == false and (.memory_how | test("not permitted|not implemented"))' >/dev/null; then
    echo "note topo_membind${srcopt:+_sysfs}: $(printf '%s' "$t" | jq -r .memory_how) (this sandbox forbids memory policies)"
  else
    check "topo_membind${srcopt:+_sysfs}" "$t" ".memory_bound == true and .touched_page_node == $node and
      (.memory_how | test(\"read back MPOL_(PREFERRED|BIND)\"))"
  fi
done
if "$BIN/mt-topology" --bind 999 >/dev/null 2>&1; then echo "FAIL: --bind 999 succeeded"; fails=$((fails + 1)); else echo "ok   bind_bad_node"; fi
if "$BIN/mt-topology" --bogus >/dev/null 2>&1; then echo "FAIL: --bogus accepted"; fails=$((fails + 1)); else echo "ok   bad_option"; fi

keys='["cpu_cores","cpu_model","cuda","driver","git_dirty","git_sha","gpu_mem_bytes","gpu_name","gpu_numa_node","hardware_profile","host_mem_bytes","numa_nodes","pcie_gbps","utc"]'
e=$(MT_NVIDIA_SMI=/bin/false "$BIN/mt-env") || { echo "FAIL: mt-env exited $?"; exit 1; }
check env_keys "$e" "keys == $keys"
check env_no_gpu "$e" '.gpu_name == null and .gpu_mem_bytes == null and .driver == null and .gpu_numa_node == null and .pcie_gbps == null'
check env_host "$e" '.host_mem_bytes > 0 and .cpu_cores >= 1 and .numa_nodes >= 1 and .hardware_profile == null'
check env_utc "$e" '.utc | test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$")'
check env_git "$e" '(.git_sha == null or (.git_sha | test("^[0-9a-f]{7,40}$"))) and .git_dirty == null'

# ---- git_dirty, in a private repository (never this tree: others may be committing here):
# clean, an edited tracked file, an untracked source file (CMake's globs would compile it),
# and an untracked file under results/ (what a run writes; it does not count)
if command -v git >/dev/null; then
  g=$tmp/gitrepo
  mkdir -p "$g/src" "$g/results" && git -C "$g" init -q && echo 'int x;' > "$g/src/a.c" &&
    git -C "$g" add -A && git -C "$g" -c user.name=t -c user.email=t@t commit -qm init
  envbin=$(cd "$BIN" && pwd)/mt-env
  dirty() { (cd "$g" && env -u MT_ENV_NO_GIT -u MT_GIT_DIRTY -u MT_GIT_SHA MT_NVIDIA_SMI=/bin/false "$envbin" | jq -c .git_dirty); }
  [ "$(dirty)" = false ] && echo "ok   git_clean" || { echo "FAIL git_clean: $(dirty)"; fails=$((fails + 1)); }
  echo 'int y;' > "$g/results/row.jsonl"
  [ "$(dirty)" = false ] && echo "ok   git_untracked_results_not_dirty" || { echo "FAIL untracked results/: $(dirty)"; fails=$((fails + 1)); }
  echo 'int z;' > "$g/src/new.c"
  [ "$(dirty)" = true ] && echo "ok   git_untracked_source_dirty" || { echo "FAIL untracked src/new.c: $(dirty)"; fails=$((fails + 1)); }
  rm "$g/src/new.c"; echo 'int w;' >> "$g/src/a.c"
  [ "$(dirty)" = true ] && echo "ok   git_modified_dirty" || { echo "FAIL modified src/a.c: $(dirty)"; fails=$((fails + 1)); }
else
  echo "note git_dirty: git not installed, not checked"
fi

# ---- a fake machine
r=$tmp/root
mkdir -p "$r/proc" "$r/sys/devices/system/cpu" "$r/sys/bus/pci/devices"
printf 'MemTotal:       131072000 kB\nMemFree: 1 kB\n' > "$r/proc/meminfo"
printf 'processor\t: 0\nmodel name\t: Fake CPU 9000 @ 3.0GHz\n\n' > "$r/proc/cpuinfo"
echo 0-7 > "$r/sys/devices/system/cpu/online"
for c in 0 1 2 3 4 5 6 7; do # 2 packages x 2 cores x 2 threads
  mkdir -p "$r/sys/devices/system/cpu/cpu$c/topology"
  echo $((c % 2)) > "$r/sys/devices/system/cpu/cpu$c/topology/core_id"
  echo $((c / 4)) > "$r/sys/devices/system/cpu/cpu$c/topology/physical_package_id"
done
for n in 0 1; do
  d=$r/sys/devices/system/node/node$n; mkdir -p "$d"
  echo "$((n * 4))-$((n * 4 + 3))" > "$d/cpulist"
  printf 'Node %d MemTotal:       65536000 kB\n' "$n" > "$d/meminfo"
done
pci() { # pci BUS_ID VENDOR CLASS NUMA [CUR_SPEED CUR_W MAX_SPEED MAX_W]
  local d=$r/sys/bus/pci/devices/$1; mkdir -p "$d"
  echo "$2" > "$d/vendor"; echo "$3" > "$d/class"; echo 0x2330 > "$d/device"; echo "$4" > "$d/numa_node"
  if [ $# -gt 4 ]; then echo "$5" > "$d/current_link_speed"; echo "$6" > "$d/current_link_width"
    echo "$7" > "$d/max_link_speed"; echo "$8" > "$d/max_link_width"; fi
}
pci 0000:1b:00.0 0x10de 0x030200 1 "2.5 GT/s PCIe" 16 "32.0 GT/s PCIe" 16
pci 0000:1b:00.1 0x10de 0x040300 1
pci 0000:00:01.0 0x8086 0x060400 -1
t=$("$BIN/mt-topology" --root "$r") || { echo "FAIL: mt-topology --root"; exit 1; }
check fake_host "$t" '.source == "sysfs" and .cpu_model == "Fake CPU 9000 @ 3.0GHz" and .pus == 8 and .cores == 4 and .host_mem_bytes == 134217728000'
check fake_nodes "$t" '[.numa_nodes[] | [.node, .cpus, .cpulist, .mem_bytes]] == [[0,4,"0-3",67108864000],[1,4,"4-7",67108864000]]'
check fake_gpu "$t" '.gpus | length == 1 and .[0].bus_id == "0000:1b:00.0" and .[0].numa_node == 1 and .[0].vendor_id == "0x10de"'
check fake_link "$t" '.gpus[0] | .link_gts == 2.5 and .link_width == 16 and .max_link_gts == 32 and (.link_gbps * 100 | round) == 6302'
check fake_pcie "$t" '.gpus[0] | .link == "pcie" and .memory_node == null'
check fake_no_gpu_mem "$t" '[.numa_nodes[].gpu_memory] == [false, false]'

# ---- Grace Hopper: Arm host, GPU on NVLink-C2C, its HBM a CPU-less NUMA node
g=harness/tests/data/grace_gh200
t=$("$BIN/mt-topology" --root "$g") || { echo "FAIL: mt-topology --root $g"; exit 1; }
check gh_host "$t" '.cpu_model == "ARM Neoverse-V2" and .pus == 72 and .cores == 72 and .host_mem_bytes == 480000000000'
check gh_nodes "$t" '[.numa_nodes[] | [.node, .cpus, .cpulist, .mem_bytes, .gpu_memory]] == [[0,72,"0-71",480000000000,false],[1,0,"",102625181696,true]]'
check gh_gpu "$t" '.gpus | length == 1 and .[0].bus_id == "0009:01:00.0" and .[0].device_id == "0x2342" and .[0].numa_node == 0'
check gh_c2c "$t" '.gpus[0] | .link == "nvlink-c2c" and .link_gbps == 450 and .memory_node == 1 and .link_gts == null'
e=$(MT_SYSFS_ROOT=$g MT_NVIDIA_SMI=/bin/false "$BIN/mt-env") || { echo "FAIL: mt-env on the Grace snapshot"; exit 1; }
check gh_env "$e" '.cpu_model == "ARM Neoverse-V2" and .cpu_cores == 72 and .host_mem_bytes == 480000000000 and .pcie_gbps == null'

cat > "$tmp/nvidia-smi" <<'SMI'
#!/bin/sh
echo "NVIDIA H100 80GB HBM3, 81559, 570.86.15, 00000000:1B:00.0, 5, 16"
SMI
chmod +x "$tmp/nvidia-smi"
e=$(MT_SYSFS_ROOT=$r MT_NVIDIA_SMI=$tmp/nvidia-smi MT_GIT_SHA=0123456789ab MT_GIT_DIRTY=1 \
    "$BIN/mt-env" --hardware-profile h100-128g) || { echo "FAIL: mt-env on the fake machine"; exit 1; }
check fake_env_keys "$e" "keys == $keys"
check fake_env_gpu "$e" '.gpu_name == "NVIDIA H100 80GB HBM3" and .gpu_mem_bytes == 85520809984 and .driver == "570.86.15" and .gpu_numa_node == 1 and .pcie_gbps == 63.02'
check fake_env_host "$e" '.cpu_model == "Fake CPU 9000 @ 3.0GHz" and .cpu_cores == 4 and .numa_nodes == 2 and .host_mem_bytes == 134217728000'
check fake_env_meta "$e" '.git_sha == "0123456789ab" and .git_dirty == true and .hardware_profile == "h100-128g"'

[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
