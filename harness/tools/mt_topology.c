// mt-topology: prints the machine's topology as one JSON line on stdout.
//   mt-topology [--source auto|hwloc|sysfs] [--root DIR] [--bind NODE] [--pretty]
// --root reads a sysfs tree copied elsewhere (tests); --bind binds this thread to
// NODE first and adds "bound_cpus" (the resulting affinity), "memory_bound" and
// "memory_how" (what mt_topology_bind_to_node says of the memory policy) and
// "touched_page_node" (the node a page this thread then allocates and touches lands
// on, asked of the kernel with get_mempolicy(MPOL_F_NODE | MPOL_F_ADDR)).
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "topology.h"

static void usage(FILE *f) {
    fprintf(f, "usage: mt-topology [--source auto|hwloc|sysfs] [--root DIR] [--bind NODE] [--pretty]\n");
}

int main(int argc, char **argv) {
    const char *source = "auto", *root = NULL;
    int bind = -1, pretty = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--source") && i + 1 < argc) source = argv[++i];
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) root = argv[++i];
        else if (!strcmp(argv[i], "--bind") && i + 1 < argc) bind = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pretty")) pretty = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "mt-topology: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (strcmp(source, "auto") && strcmp(source, "hwloc") && strcmp(source, "sysfs")) {
        fprintf(stderr, "mt-topology: --source must be auto, hwloc or sysfs, not '%s'\n", source);
        return 2;
    }
    if (!strcmp(source, "sysfs")) setenv("MT_TOPOLOGY_SOURCE", "sysfs", 1);
    mt_topology *t = calloc(1, sizeof *t);
    if (!t) return 1;
    mt_status st = root ? mt_topology_detect_sysfs(t, root) : mt_topology_detect(t);
    if (st != MT_OK) {
        fprintf(stderr, "mt-topology: %s\n", mt_last_error());
        return 1;
    }
    if (!strcmp(source, "hwloc") && strcmp(t->source, "hwloc")) {
        fprintf(stderr, "mt-topology: --source hwloc: hwloc %s; HINT: use --source auto\n",
#ifdef MT_HAVE_HWLOC
                "failed at run time"
#else
                "was not found at build time"
#endif
        );
        return 1;
    }
    cJSON *o = mt_topology_to_json(t);
    if (bind >= 0) {
        mt_numa_binding nb;
        if ((st = mt_topology_bind_to_node(bind, &nb)) != MT_OK) {
            fprintf(stderr, "mt-topology: --bind %d: %s\n", bind, mt_last_error());
            return 1;
        }
        cpu_set_t set;
        CPU_ZERO(&set);
        cJSON *cpus = cJSON_AddArrayToObject(o, "bound_cpus");
        if (sched_getaffinity(0, sizeof set, &set) == 0)
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &set)) cJSON_AddItemToArray(cpus, cJSON_CreateNumber(c));
        cJSON_AddBoolToObject(o, "memory_bound", nb.memory);
        cJSON_AddStringToObject(o, "memory_how", nb.mem_how);
        // Where memory this thread touches now lands: one page, asked of the kernel.
        long page = sysconf(_SC_PAGESIZE);
        char *p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        int where = -1;
        if (p != MAP_FAILED) {
            p[0] = 1;
            if (syscall(SYS_get_mempolicy, &where, NULL, 0UL, p, 3UL /* MPOL_F_NODE | MPOL_F_ADDR */)) where = -1;
            munmap(p, (size_t)page);
        }
        cJSON_AddItemToObject(o, "touched_page_node", where >= 0 ? cJSON_CreateNumber(where) : cJSON_CreateNull());
    }
    char *s = pretty ? cJSON_Print(o) : cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
    free(t);
    return 0;
}
