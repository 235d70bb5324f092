// topology.c: NUMA nodes, cores and NVIDIA GPUs from hwloc (when compiled in) or
// sysfs, and binding a thread near a node. See topology.h.
#define _GNU_SOURCE
#include "topology.h"

#include "core/sysinfo.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PATH_CAP 4096 // sysfs paths are short; sized so snprintf never truncates

#ifdef MT_HAVE_HWLOC
#include <hwloc.h>
#endif

#define NVIDIA_VENDOR_ID 0x10deu

// ---------------------------------------------------------------- small helpers

double mt_pcie_link_gbps(double gts, int width) {
    if (gts <= 0 || width <= 0) return 0;
    double enc = gts < 8.0 ? 8.0 / 10.0 : 128.0 / 130.0; // Gen1/2 8b/10b, Gen3+ 128b/130b
    return gts * width * enc / 8.0;
}

int mt_cpulist_count(const char *list) {
    int n = 0;
    const char *s = list;
    while (*s && *s != '\n') {
        char *end;
        long a = strtol(s, &end, 10);
        if (end == s || a < 0) return -1;
        long b = a;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            if (end == s + 1 || b < a) return -1;
            s = end;
        }
        n += (int)(b - a + 1);
        if (*s == ',') s++;
        else if (*s && *s != '\n') return -1;
    }
    return n;
}

// Reads a whole small file (first line kept with its newline stripped). 0 on success.
static int read_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    if (!fgets(buf, (int)cap, f)) buf[0] = 0;
    fclose(f);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = 0;
    return 0;
}

static long read_long(const char *path, long dflt, int base) {
    char buf[64];
    if (read_line(path, buf, sizeof buf)) return dflt;
    char *end;
    errno = 0;
    long v = strtol(buf, &end, base);
    return (end == buf || errno) ? dflt : v;
}

// "32.0 GT/s PCIe", "8 GT/s", "8.0 GT/s" -> 32.0, 8.0; "Unknown" -> 0
static double parse_gts(const char *s) {
    char *end;
    double v = strtod(s, &end);
    return end == s ? 0 : v;
}

static void join(char *out, size_t cap, const char *root, const char *rel) {
    size_t n = strlen(root);
    snprintf(out, cap, "%s%s%s", root, (n && root[n - 1] == '/') ? "" : "/", rel[0] == '/' ? rel + 1 : rel);
}

// Canonical lower-case "dddd:bb:dd.f" from nvidia-smi's "00000000:1B:00.0" or "1b:00.0".
static void canon_bus_id(const char *in, char *out, size_t cap) {
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (sscanf(in, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4 ||
        (dom = 0, sscanf(in, "%x:%x.%x", &bus, &dev, &fn) == 3))
        snprintf(out, cap, "%04x:%02x:%02x.%x", dom & 0xffffu, bus, dev, fn);
    else
        snprintf(out, cap, "%s", in);
}

const mt_topo_gpu *mt_topology_find_gpu(const mt_topology *t, const char *bus_id) {
    char want[32];
    canon_bus_id(bus_id, want, sizeof want);
    for (int i = 0; i < t->n_gpus; i++)
        if (strcasecmp(t->gpus[i].bus_id, want) == 0) return &t->gpus[i];
    return NULL;
}

// ---------------------------------------------------------------- sysfs

// Arm cores by /proc/cpuinfo's "CPU implementer" and "CPU part" (the kernel's
// arch/arm64/include/asm/cputype.h numbers); lscpu names them the same way.
static const struct {
    unsigned impl, part;
    const char *name;
} ARM_PARTS[] = {
    {0x41, 0xd08, "ARM Cortex-A72"},    {0x41, 0xd0b, "ARM Cortex-A76"},    {0x41, 0xd0c, "ARM Neoverse-N1"},
    {0x41, 0xd40, "ARM Neoverse-V1"},   {0x41, 0xd49, "ARM Neoverse-N2"},   {0x41, 0xd4f, "ARM Neoverse-V2"},
    {0x41, 0xd84, "ARM Neoverse-V3"},   {0x41, 0xd8e, "ARM Neoverse-N3"},
};

// The value after "key<spaces/tabs>:" on a cpuinfo line, newline stripped; NULL if another key.
static char *cpuinfo_value(char *line, const char *key) {
    size_t k = strlen(key);
    if (strncmp(line, key, k) || (line[k] != ' ' && line[k] != '\t' && line[k] != ':')) return NULL;
    char *c = strchr(line + k, ':');
    if (!c) return NULL;
    c++;
    while (*c == ' ' || *c == '\t') c++;
    size_t n = strlen(c);
    while (n && (c[n - 1] == '\n' || c[n - 1] == ' ')) c[--n] = 0;
    return c;
}

static void sysfs_cpu_model(mt_topology *t, const char *root) {
    char path[512], line[512];
    join(path, sizeof path, root, "proc/cpuinfo");
    FILE *f = fopen(path, "r");
    if (!f) return;
    long impl = -1, part = -1;
    while (fgets(line, sizeof line, f)) {
        char *v;
        if ((v = cpuinfo_value(line, "model name"))) { // x86
            snprintf(t->cpu_model, sizeof t->cpu_model, "%s", v);
            break;
        }
        // Arm (Grace) has no model name: the first CPU's implementer and part name the core.
        if (impl < 0 && (v = cpuinfo_value(line, "CPU implementer"))) impl = strtol(v, NULL, 0);
        if (part < 0 && (v = cpuinfo_value(line, "CPU part"))) part = strtol(v, NULL, 0);
    }
    fclose(f);
    if (t->cpu_model[0] || impl < 0 || part < 0) return;
    for (size_t i = 0; i < sizeof ARM_PARTS / sizeof ARM_PARTS[0]; i++)
        if (ARM_PARTS[i].impl == (unsigned)impl && ARM_PARTS[i].part == (unsigned)part) {
            snprintf(t->cpu_model, sizeof t->cpu_model, "%s", ARM_PARTS[i].name);
            return;
        }
    snprintf(t->cpu_model, sizeof t->cpu_model, "Arm implementer 0x%02lx part 0x%03lx", impl, part);
}

// Physical cores = distinct (package, core_id) pairs over the online CPUs.
static int sysfs_count_cores(const char *root, int pus) {
    char path[512];
    int cap = pus > 0 ? pus : 1, n = 0;
    long(*seen)[2] = calloc((size_t)cap, sizeof *seen);
    if (!seen) return pus;
    for (int cpu = 0, found = 0; found < pus && cpu < 65536; cpu++) {
        char rel[128];
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        join(path, sizeof path, root, rel);
        long core = read_long(path, -1, 10);
        if (core < 0) continue;
        found++;
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        join(path, sizeof path, root, rel);
        long pkg = read_long(path, 0, 10);
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= seen[i][0] == pkg && seen[i][1] == core;
        if (!dup && n < cap) seen[n][0] = pkg, seen[n][1] = core, n++;
    }
    free(seen);
    return n > 0 ? n : pus;
}

static int cmp_node(const void *a, const void *b) {
    return ((const mt_topo_node *)a)->os_index - ((const mt_topo_node *)b)->os_index;
}

static void sysfs_nodes(mt_topology *t, const char *root) {
    char dirpath[PATH_CAP], path[2 * PATH_CAP];
    join(dirpath, sizeof dirpath, root, "sys/devices/system/node");
    DIR *d = opendir(dirpath);
    t->n_nodes = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) && t->n_nodes < MT_TOPO_MAX_NODES) {
            if (strncmp(e->d_name, "node", 4) || !isdigit((unsigned char)e->d_name[4])) continue;
            mt_topo_node *nd = &t->nodes[t->n_nodes];
            memset(nd, 0, sizeof *nd);
            nd->os_index = atoi(e->d_name + 4);
            snprintf(path, sizeof path, "%s/%s/cpulist", dirpath, e->d_name);
            read_line(path, nd->cpulist, sizeof nd->cpulist);
            int c = mt_cpulist_count(nd->cpulist);
            nd->cpus = c > 0 ? c : 0;
            snprintf(path, sizeof path, "%s/%s/meminfo", dirpath, e->d_name);
            nd->mem_bytes = mt_meminfo_bytes(path, "MemTotal");
            if (nd->cpus || nd->mem_bytes) t->n_nodes++;
        }
        closedir(d);
        qsort(t->nodes, (size_t)t->n_nodes, sizeof t->nodes[0], cmp_node);
    }
    if (t->n_nodes == 0) { // kernel without NUMA: one node with everything
        mt_topo_node *nd = &t->nodes[0];
        memset(nd, 0, sizeof *nd);
        join(path, sizeof path, root, "sys/devices/system/cpu/online");
        read_line(path, nd->cpulist, sizeof nd->cpulist);
        int c = mt_cpulist_count(nd->cpulist);
        nd->cpus = c > 0 ? c : 0;
        nd->mem_bytes = t->host_mem_bytes;
        if (nd->cpus || nd->mem_bytes) t->n_nodes = 1;
    }
}

// ---------------------------------------------------------------- Grace Hopper

// Hopper GPUs of GH200 superchips (pci.ids: "GH100 [GH200 120GB / 480GB]", "GH100 [GH200 144G HBM3e]").
int mt_topo_is_c2c_gpu(unsigned device_id) { return device_id == 0x2342 || device_id == 0x2348; }

// NVLink-C2C per direction: NVIDIA's GH200 datasheet gives 900 GB/s total, both directions.
#define MT_C2C_GBPS 450.0

// Marks C2C GPUs; pairs the k-th of them (by bus id) with the k-th NUMA node that has
// memory and no CPUs (by number), which is how the driver onlines each GPU's HBM,
// and takes that memory out of the host's. A C2C GPU with no NUMA node from sysfs
// gets the only node with CPUs, when there is one.
static void grace_hopper_fixup(mt_topology *t) {
    int cpu_nodes = 0, cpu_node = -1, k = 0;
    for (int i = 0; i < t->n_nodes; i++)
        if (t->nodes[i].cpus > 0) cpu_nodes++, cpu_node = t->nodes[i].os_index;
    for (int i = 0; i < t->n_gpus; i++) {
        mt_topo_gpu *g = &t->gpus[i];
        g->memory_node = -1;
        if (!mt_topo_is_c2c_gpu(g->device_id)) {
            snprintf(g->link, sizeof g->link, "pcie");
            continue;
        }
        snprintf(g->link, sizeof g->link, "nvlink-c2c");
        g->link_gbps = MT_C2C_GBPS;
        if (g->numa_node < 0 && cpu_nodes == 1) g->numa_node = cpu_node;
        for (; k < t->n_nodes; k++) {
            mt_topo_node *nd = &t->nodes[k];
            if (nd->cpus == 0 && nd->mem_bytes > 0 && !nd->gpu_memory) {
                nd->gpu_memory = 1;
                g->memory_node = nd->os_index;
                if (t->host_mem_bytes > nd->mem_bytes) t->host_mem_bytes -= nd->mem_bytes;
                k++;
                break;
            }
        }
    }
}

// Fills the link and NUMA fields of g from /sys/bus/pci/devices/<bus_id>/ (those it has).
static void sysfs_pci_fill(mt_topo_gpu *g, const char *devdir) {
    char path[3 * PATH_CAP], buf[64];
    snprintf(path, sizeof path, "%s/current_link_speed", devdir);
    if (!read_line(path, buf, sizeof buf)) g->link_gts = parse_gts(buf);
    snprintf(path, sizeof path, "%s/current_link_width", devdir);
    g->link_width = (int)read_long(path, 0, 10);
    snprintf(path, sizeof path, "%s/max_link_speed", devdir);
    if (!read_line(path, buf, sizeof buf)) g->max_link_gts = parse_gts(buf);
    snprintf(path, sizeof path, "%s/max_link_width", devdir);
    g->max_link_width = (int)read_long(path, 0, 10);
    if (g->link_width < 0 || g->link_width > 64) g->link_width = 0; // 255 = "unknown" on some kernels
    if (g->max_link_width < 0 || g->max_link_width > 64) g->max_link_width = 0;
    double gbps = mt_pcie_link_gbps(g->max_link_gts, g->max_link_width);
    if (gbps <= 0) gbps = mt_pcie_link_gbps(g->link_gts, g->link_width);
    if (gbps > 0) g->link_gbps = gbps;
}

static int cmp_gpu(const void *a, const void *b) {
    return strcmp(((const mt_topo_gpu *)a)->bus_id, ((const mt_topo_gpu *)b)->bus_id);
}

static void sysfs_gpus(mt_topology *t, const char *root) {
    char dirpath[PATH_CAP], devdir[2 * PATH_CAP], path[3 * PATH_CAP];
    join(dirpath, sizeof dirpath, root, "sys/bus/pci/devices");
    DIR *d = opendir(dirpath);
    t->n_gpus = 0;
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && t->n_gpus < MT_TOPO_MAX_GPUS) {
        if (e->d_name[0] == '.') continue;
        snprintf(devdir, sizeof devdir, "%s/%s", dirpath, e->d_name);
        snprintf(path, sizeof path, "%s/vendor", devdir);
        long vendor = read_long(path, -1, 16);
        snprintf(path, sizeof path, "%s/class", devdir);
        long cls = read_long(path, -1, 16);
        // Display controllers only (0x03xxxx): skips NVIDIA's audio functions and NVSwitches.
        if (vendor != (long)NVIDIA_VENDOR_ID || cls < 0 || (cls >> 16) != 0x03) continue;
        mt_topo_gpu *g = &t->gpus[t->n_gpus++];
        memset(g, 0, sizeof *g);
        canon_bus_id(e->d_name, g->bus_id, sizeof g->bus_id);
        g->vendor_id = (unsigned)vendor;
        g->class_id = (unsigned)(cls >> 8);
        snprintf(path, sizeof path, "%s/device", devdir);
        g->device_id = (unsigned)read_long(path, 0, 16);
        snprintf(path, sizeof path, "%s/numa_node", devdir);
        g->numa_node = (int)read_long(path, -1, 10);
        sysfs_pci_fill(g, devdir);
    }
    closedir(d);
    qsort(t->gpus, (size_t)t->n_gpus, sizeof t->gpus[0], cmp_gpu);
}

mt_status mt_topology_detect_sysfs(mt_topology *t, const char *root) {
    char path[512], buf[256];
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "sysfs");
    sysfs_cpu_model(t, root);
    join(path, sizeof path, root, "proc/meminfo");
    t->host_mem_bytes = mt_meminfo_bytes(path, "MemTotal");
    join(path, sizeof path, root, "sys/devices/system/cpu/online");
    if (!read_line(path, buf, sizeof buf)) t->pus = mt_cpulist_count(buf);
    if (t->pus <= 0 && root[0] == '/' && root[1] == 0) t->pus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (t->pus < 0) t->pus = 0;
    t->cores = sysfs_count_cores(root, t->pus);
    sysfs_nodes(t, root);
    sysfs_gpus(t, root);
    if (t->n_nodes == 0) return mt_fail(MT_ERR_IO, "%s: no NUMA node or CPU list readable under sysfs", root);
    // A single-node machine reports numa_node -1 for its devices: the one node is the nearest.
    for (int i = 0; i < t->n_gpus; i++)
        if (t->gpus[i].numa_node < 0 && t->n_nodes == 1) t->gpus[i].numa_node = t->nodes[0].os_index;
    grace_hopper_fixup(t);
    return MT_OK;
}

// ---------------------------------------------------------------- hwloc

#ifdef MT_HAVE_HWLOC
static mt_status open_hwloc(hwloc_topology_t *topo, int with_io) {
    if (hwloc_topology_init(topo)) return mt_fail(MT_ERR_BACKEND, "hwloc_topology_init failed");
    if (with_io) hwloc_topology_set_io_types_filter(*topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(*topo)) {
        hwloc_topology_destroy(*topo);
        return mt_fail(MT_ERR_BACKEND, "hwloc_topology_load failed: %s", strerror(errno));
    }
    return MT_OK;
}

static mt_status detect_hwloc(mt_topology *t) {
    hwloc_topology_t topo;
    MT_TRY(open_hwloc(&topo, 1));
    memset(t, 0, sizeof *t);
    snprintf(t->source, sizeof t->source, "hwloc");
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    t->host_mem_bytes = (size_t)root->total_memory;
    t->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    t->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (t->cores <= 0) t->cores = t->pus;
    const char *model = NULL;
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (pkg) model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
    if (!model) model = hwloc_obj_get_info_by_name(root, "CPUModel");
    if (model) snprintf(t->cpu_model, sizeof t->cpu_model, "%s", model);

    int nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < nn && t->n_nodes < MT_TOPO_MAX_NODES; i++) {
        hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
        mt_topo_node *nd = &t->nodes[t->n_nodes++];
        nd->os_index = (int)o->os_index;
        nd->mem_bytes = (size_t)o->attr->numanode.local_memory;
        nd->cpus = hwloc_bitmap_weight(o->cpuset);
        if (nd->cpus < 0) nd->cpus = 0;
        if (nd->cpus) hwloc_bitmap_list_snprintf(nd->cpulist, sizeof nd->cpulist, o->cpuset);
    }
    qsort(t->nodes, (size_t)t->n_nodes, sizeof t->nodes[0], cmp_node);

    for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(topo, o)) && t->n_gpus < MT_TOPO_MAX_GPUS;) {
        struct hwloc_pcidev_attr_s *pa = &o->attr->pcidev;
        if (pa->vendor_id != NVIDIA_VENDOR_ID || (pa->class_id >> 8) != 0x03) continue;
        mt_topo_gpu *g = &t->gpus[t->n_gpus++];
        memset(g, 0, sizeof *g);
        snprintf(g->bus_id, sizeof g->bus_id, "%04x:%02x:%02x.%x", pa->domain, pa->bus, pa->dev, pa->func);
        g->vendor_id = pa->vendor_id;
        g->device_id = pa->device_id;
        g->class_id = pa->class_id;
        // Nearest NUMA node: the node set of the first non-I/O ancestor, when it is one node.
        g->numa_node = -1;
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, o);
        if (anc && anc->nodeset && hwloc_bitmap_weight(anc->nodeset) == 1)
            g->numa_node = hwloc_bitmap_first(anc->nodeset);
        // hwloc gives only GB/s; sysfs has the speed and width behind it.
        char devdir[PATH_CAP];
        snprintf(devdir, sizeof devdir, "/sys/bus/pci/devices/%s", g->bus_id);
        sysfs_pci_fill(g, devdir);
        if (g->link_gbps <= 0 && pa->linkspeed > 0) g->link_gbps = pa->linkspeed;
    }
    qsort(t->gpus, (size_t)t->n_gpus, sizeof t->gpus[0], cmp_gpu);
    hwloc_topology_destroy(topo);
    if (t->n_nodes == 0) return mt_fail(MT_ERR_BACKEND, "hwloc found no NUMA node");
    return MT_OK;
}
#endif

mt_status mt_topology_detect(mt_topology *t) {
    const char *fake = getenv("MT_SYSFS_ROOT"); // tests: a fake sysfs tree, never hwloc
    if (fake && fake[0]) return mt_topology_detect_sysfs(t, fake);
#ifdef MT_HAVE_HWLOC
    const char *src = getenv("MT_TOPOLOGY_SOURCE");
    if (!src || strcmp(src, "sysfs") != 0) {
        if (detect_hwloc(t) == MT_OK) {
            // hwloc reads cpu model from /proc/cpuinfo too, but not on every arch.
            if (!t->cpu_model[0]) sysfs_cpu_model(t, "/");
            // Host memory is what the OS can allocate (/proc/meminfo); hwloc sums the
            // nodes' meminfo, which some VMs report short of it.
            size_t mem = mt_host_mem_total_bytes();
            if (mem) t->host_mem_bytes = mem;
            grace_hopper_fixup(t);
            return MT_OK;
        }
    }
#endif
    return mt_topology_detect_sysfs(t, "/");
}

// ---------------------------------------------------------------- binding

// The sysfs path (no hwloc) and the policy read-back are the engine's own
// (megatrain/core/sysinfo.c), so the binary that trains binds the same way.
static mt_status bind_sysfs(int node, mt_numa_binding *b) { return mt_numa_bind_node(node, b); }

mt_status mt_topology_bind_to_node(int node, mt_numa_binding *out) {
    mt_numa_binding b = {0};
    if (!out) out = &b;
    memset(out, 0, sizeof *out);
    if (node < 0) return mt_fail(MT_ERR_ARG, "NUMA node %d: must be >= 0", node);
#ifdef MT_HAVE_HWLOC
    const char *src = getenv("MT_TOPOLOGY_SOURCE");
    hwloc_topology_t topo;
    if ((!src || strcmp(src, "sysfs") != 0) && open_hwloc(&topo, 0) == MT_OK) {
        hwloc_obj_t o = hwloc_get_numanode_obj_by_os_index(topo, (unsigned)node);
        mt_status st = MT_OK;
        if (!o) st = mt_fail(MT_ERR_ARG, "NUMA node %d does not exist", node);
        else if (hwloc_bitmap_iszero(o->cpuset))
            st = mt_fail(MT_ERR_ARG, "NUMA node %d has no CPUs to bind to (memory-only node)", node);
        else if (hwloc_set_cpubind(topo, o->cpuset, HWLOC_CPUBIND_THREAD))
            st = mt_fail(MT_ERR_BACKEND, "hwloc_set_cpubind to NUMA node %d: %s", node, strerror(errno));
        else {
            out->cpus = hwloc_bitmap_weight(o->cpuset);
            // BIND without STRICT is MPOL_PREFERRED on Linux: falls back when the node is full.
            int mode;
            if (hwloc_set_membind(topo, o->nodeset, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET))
                snprintf(out->mem_how, sizeof out->mem_how, "hwloc_set_membind to node %d: %s", node, strerror(errno));
            else if ((mode = mt_numa_mempolicy_prefers(node, out)))
                out->memory = 1, snprintf(out->mem_how, sizeof out->mem_how,
                                          "hwloc_set_membind(BIND, not strict) to node %d; read back %s", node,
                                          mt_numa_mpol_name(mode));
        }
        hwloc_topology_destroy(topo);
        return st;
    }
#endif
    return bind_sysfs(node, out);
}

// ---------------------------------------------------------------- JSON

static cJSON *num_or_null(double v, int known) { return known ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

cJSON *mt_topology_to_json(const mt_topology *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", t->source);
    cJSON_AddItemToObject(o, "cpu_model", t->cpu_model[0] ? cJSON_CreateString(t->cpu_model) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "cores", num_or_null(t->cores, t->cores > 0));
    cJSON_AddItemToObject(o, "pus", num_or_null(t->pus, t->pus > 0));
    cJSON_AddItemToObject(o, "host_mem_bytes", num_or_null((double)t->host_mem_bytes, t->host_mem_bytes > 0));
    cJSON *nodes = cJSON_AddArrayToObject(o, "numa_nodes");
    for (int i = 0; i < t->n_nodes; i++) {
        const mt_topo_node *nd = &t->nodes[i];
        cJSON *n = cJSON_CreateObject();
        cJSON_AddNumberToObject(n, "node", nd->os_index);
        cJSON_AddItemToObject(n, "mem_bytes", num_or_null((double)nd->mem_bytes, nd->mem_bytes > 0));
        cJSON_AddNumberToObject(n, "cpus", nd->cpus);
        cJSON_AddStringToObject(n, "cpulist", nd->cpulist);
        cJSON_AddBoolToObject(n, "gpu_memory", nd->gpu_memory != 0);
        cJSON_AddItemToArray(nodes, n);
    }
    cJSON *gpus = cJSON_AddArrayToObject(o, "gpus");
    for (int i = 0; i < t->n_gpus; i++) {
        const mt_topo_gpu *g = &t->gpus[i];
        char hex[16];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "bus_id", g->bus_id);
        snprintf(hex, sizeof hex, "0x%04x", g->vendor_id);
        cJSON_AddStringToObject(j, "vendor_id", hex);
        snprintf(hex, sizeof hex, "0x%04x", g->device_id);
        cJSON_AddStringToObject(j, "device_id", hex);
        cJSON_AddItemToObject(j, "numa_node", num_or_null(g->numa_node, g->numa_node >= 0));
        cJSON_AddStringToObject(j, "link", g->link[0] ? g->link : "pcie");
        cJSON_AddItemToObject(j, "link_gts", num_or_null(g->link_gts, g->link_gts > 0));
        cJSON_AddItemToObject(j, "link_width", num_or_null(g->link_width, g->link_width > 0));
        cJSON_AddItemToObject(j, "max_link_gts", num_or_null(g->max_link_gts, g->max_link_gts > 0));
        cJSON_AddItemToObject(j, "max_link_width", num_or_null(g->max_link_width, g->max_link_width > 0));
        cJSON_AddItemToObject(j, "link_gbps", num_or_null(g->link_gbps, g->link_gbps > 0));
        cJSON_AddItemToObject(j, "memory_node", num_or_null(g->memory_node, g->memory_node >= 0));
        cJSON_AddItemToArray(gpus, j);
    }
    return o;
}
