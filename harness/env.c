// env.c: the results `env` block. Sources of each key are listed in env.h.
#define _GNU_SOURCE
#include "env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "topology.h"

#ifndef MT_GIT_SHA
#define MT_GIT_SHA "unknown"
#endif
#ifndef MT_SOURCE_DIR
#define MT_SOURCE_DIR ""
#endif

// ---------------------------------------------------------------- git, read as files

static int read_first_line(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    if (!fgets(buf, (int)cap, f)) buf[0] = 0;
    fclose(f);
    size_t n = strlen(buf);
    while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = 0;
    return 0;
}

static int is_hex_sha(const char *s) {
    int n = 0;
    while (isxdigit((unsigned char)s[n])) n++;
    return n >= 40;
}

// Finds the work tree holding `start` (walking up) and its git dir. 0 on success.
static int find_git(const char *start, char *worktree, size_t wcap, char *gitdir, size_t gcap) {
    char dir[1024];
    if (!start || !start[0]) return -1;
    snprintf(dir, sizeof dir, "%s", start);
    for (;;) {
        char p[1100];
        struct stat st;
        snprintf(p, sizeof p, "%s/.git", dir);
        if (stat(p, &st) == 0) {
            snprintf(worktree, wcap, "%s", dir);
            if (S_ISDIR(st.st_mode)) {
                snprintf(gitdir, gcap, "%s", p);
                return 0;
            }
            char line[512]; // a linked worktree: ".git" is a file "gitdir: PATH"
            if (read_first_line(p, line, sizeof line) == 0 && strncmp(line, "gitdir: ", 8) == 0) {
                if (line[8] == '/') snprintf(gitdir, gcap, "%s", line + 8);
                else snprintf(gitdir, gcap, "%s/%s", dir, line + 8);
                return 0;
            }
            return -1;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) return -1;
        *slash = 0;
    }
}

// Resolves HEAD to a sha without running git: loose ref, then packed-refs.
static int git_head_sha(const char *gitdir, char *sha, size_t cap) {
    char p[4096], line[1024];
    snprintf(p, sizeof p, "%s/HEAD", gitdir);
    if (read_first_line(p, line, sizeof line)) return -1;
    if (is_hex_sha(line)) { // detached HEAD
        snprintf(sha, cap, "%.12s", line);
        return 0;
    }
    if (strncmp(line, "ref: ", 5)) return -1;
    char ref[1024];
    snprintf(ref, sizeof ref, "%s", line + 5);
    // A linked worktree keeps shared refs in its commondir.
    char common[2700];
    snprintf(p, sizeof p, "%s/commondir", gitdir);
    if (read_first_line(p, line, sizeof line) == 0) {
        if (line[0] == '/') snprintf(common, sizeof common, "%s", line);
        else snprintf(common, sizeof common, "%s/%s", gitdir, line);
    } else {
        snprintf(common, sizeof common, "%s", gitdir);
    }
    const char *dirs[2] = {gitdir, common};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dirs[i], ref);
        if (read_first_line(p, line, sizeof line) == 0 && is_hex_sha(line)) {
            snprintf(sha, cap, "%.12s", line);
            return 0;
        }
    }
    snprintf(p, sizeof p, "%s/packed-refs", common);
    FILE *f = fopen(p, "r");
    if (!f) return -1;
    int found = -1;
    size_t rl = strlen(ref);
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n && isspace((unsigned char)line[n - 1])) line[--n] = 0;
        if (is_hex_sha(line) && n > 41 && strcmp(line + 41, ref) == 0 && n == 41 + rl) {
            snprintf(sha, cap, "%.12s", line);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

// Runs cmd, returns its exit status (-1 if it could not run); stdout into buf.
static int run_capture(const char *cmd, char *buf, size_t cap) {
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t n = 0;
    if (cap) buf[0] = 0;
    while (cap && n + 1 < cap) {
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        if (r == 0) break;
        n += r;
    }
    if (cap) buf[n] = 0;
    char sink[256]; // drain the rest so the child is not killed by SIGPIPE mid-write
    while (fread(sink, 1, sizeof sink, f) > 0) {
    }
    int st = pclose(f);
    return (st == -1 || !WIFEXITED(st)) ? -1 : WEXITSTATUS(st);
}

static int shell_safe(const char *s) {
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || strchr("/._-:+,=@", *s))) return 0;
    return 1;
}

static void add_git(cJSON *o) {
    char cwd[1024], wt[1024] = "", gd[1600] = "", sha[64] = "";
    int have_tree = (getcwd(cwd, sizeof cwd) && find_git(cwd, wt, sizeof wt, gd, sizeof gd) == 0) ||
                    find_git(MT_SOURCE_DIR, wt, sizeof wt, gd, sizeof gd) == 0;

    const char *e = getenv("MT_GIT_SHA");
    if (e && e[0]) snprintf(sha, sizeof sha, "%s", e);
    else if (!(have_tree && git_head_sha(gd, sha, sizeof sha) == 0) && strcmp(MT_GIT_SHA, "unknown") != 0)
        snprintf(sha, sizeof sha, "%s", MT_GIT_SHA);
    cJSON_AddItemToObject(o, "git_sha", sha[0] ? cJSON_CreateString(sha) : cJSON_CreateNull());

    e = getenv("MT_GIT_DIRTY");
    if (e && e[0]) {
        int dirty = !(strcmp(e, "0") == 0 || strcasecmp(e, "false") == 0 || strcasecmp(e, "no") == 0);
        cJSON_AddBoolToObject(o, "git_dirty", dirty);
        return;
    }
    if (have_tree && !getenv("MT_ENV_NO_GIT") && shell_safe(wt)) {
        // --no-optional-locks: never take index.lock (others may be committing in this tree).
        // results/ and plots/ are what a run writes, not the code it ran: they do not count.
        // Untracked files do (not ignored ones): CMake's globs compile a new source file
        // whether git tracks it or not.
        char cmd[1400], out[256];
        snprintf(cmd, sizeof cmd,
                 "git -C '%s' --no-optional-locks status --porcelain --untracked-files=normal -- . "
                 "':(exclude)results' ':(exclude)plots' 2>/dev/null",
                 wt);
        int rc = run_capture(cmd, out, sizeof out);
        if (rc == 0) {
            cJSON_AddBoolToObject(o, "git_dirty", out[0] != 0);
            return;
        }
    }
    cJSON_AddNullToObject(o, "git_dirty");
}

// ---------------------------------------------------------------- nvidia-smi

typedef struct {
    int ok;
    char name[128], driver[64], bus_id[64];
    double mem_mib;
    int gen_max, width_max;
} smi_info;

static void trim(char *s) {
    size_t n = strlen(s), i = 0;
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    while (isspace((unsigned char)s[i])) i++;
    if (i) memmove(s, s + i, n - i + 1);
}

static int smi_known(const char *s) { return s[0] && s[0] != '[' && strcasecmp(s, "N/A") != 0; }

static void query_smi(smi_info *si) {
    memset(si, 0, sizeof *si);
    const char *smi = getenv("MT_NVIDIA_SMI");
    if (!smi || !smi[0]) smi = "nvidia-smi";
    if (!shell_safe(smi)) return;
    char idx[64] = "0";
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && cvd[0]) {
        size_t n = strcspn(cvd, ",");
        if (n > 0 && n < sizeof idx) {
            memcpy(idx, cvd, n);
            idx[n] = 0;
        }
        if (!shell_safe(idx)) snprintf(idx, sizeof idx, "0");
    }
    char cmd[512], out[1024];
    snprintf(cmd, sizeof cmd,
             "'%s' -i '%s' --query-gpu=name,memory.total,driver_version,pci.bus_id,pcie.link.gen.max,"
             "pcie.link.width.max --format=csv,noheader,nounits 2>/dev/null",
             smi, idx);
    if (run_capture(cmd, out, sizeof out) != 0) return;
    char *nl = strchr(out, '\n');
    if (nl) *nl = 0;
    char *field[6] = {0};
    int nf = 0;
    for (char *s = out; nf < 6;) {
        field[nf++] = s;
        char *c = strchr(s, ',');
        if (!c) break;
        *c = 0;
        s = c + 1;
    }
    if (nf < 4) return;
    for (int i = 0; i < nf; i++) trim(field[i]);
    if (!smi_known(field[0])) return;
    si->ok = 1;
    snprintf(si->name, sizeof si->name, "%.127s", field[0]);
    si->mem_mib = smi_known(field[1]) ? atof(field[1]) : 0;
    if (smi_known(field[2])) snprintf(si->driver, sizeof si->driver, "%.63s", field[2]);
    if (smi_known(field[3])) snprintf(si->bus_id, sizeof si->bus_id, "%.63s", field[3]);
    if (nf > 4 && smi_known(field[4])) si->gen_max = atoi(field[4]);
    if (nf > 5 && smi_known(field[5])) si->width_max = atoi(field[5]);
}

static double pcie_gen_gts(int gen) {
    static const double gts[] = {0, 2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
    return (gen >= 1 && gen <= 6) ? gts[gen] : 0;
}

// ---------------------------------------------------------------- the block

static cJSON *str_or_null(const char *s) { return (s && s[0]) ? cJSON_CreateString(s) : cJSON_CreateNull(); }

mt_status mt_env_collect(const char *hardware_profile, cJSON **out) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return mt_fail(MT_ERR_MEMORY, "env: out of memory");
    add_git(o);

    smi_info si;
    query_smi(&si);
    cJSON_AddItemToObject(o, "gpu_name", si.ok ? cJSON_CreateString(si.name) : cJSON_CreateNull());
    if (si.ok && si.mem_mib > 0) cJSON_AddNumberToObject(o, "gpu_mem_bytes", si.mem_mib * 1048576.0);
    else cJSON_AddNullToObject(o, "gpu_mem_bytes");
    cJSON_AddItemToObject(o, "driver", str_or_null(si.ok ? si.driver : NULL));
#ifdef MT_CUDA_VERSION
    cJSON_AddStringToObject(o, "cuda", MT_CUDA_VERSION);
#else
    cJSON_AddNullToObject(o, "cuda");
#endif

    mt_topology *t = calloc(1, sizeof *t);
    int have_topo = t && mt_topology_detect(t) == MT_OK;
    cJSON_AddItemToObject(o, "host_mem_bytes",
                          (have_topo && t->host_mem_bytes) ? cJSON_CreateNumber((double)t->host_mem_bytes)
                                                           : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "cpu_model", str_or_null(have_topo ? t->cpu_model : NULL));
    cJSON_AddItemToObject(o, "cpu_cores", (have_topo && t->cores > 0) ? cJSON_CreateNumber(t->cores) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "numa_nodes", have_topo ? cJSON_CreateNumber(t->n_nodes) : cJSON_CreateNull());

    const mt_topo_gpu *g = NULL;
    if (have_topo) {
        if (si.ok && si.bus_id[0]) g = mt_topology_find_gpu(t, si.bus_id);
        if (!g && t->n_gpus == 1 && si.ok) g = &t->gpus[0];
    }
    cJSON_AddItemToObject(o, "gpu_numa_node", (g && g->numa_node >= 0) ? cJSON_CreateNumber(g->numa_node) : cJSON_CreateNull());
    double pcie = 0;
    if (si.ok) pcie = mt_pcie_link_gbps(pcie_gen_gts(si.gen_max), si.width_max);
    if (pcie <= 0 && g) pcie = g->link_gbps;
    if (pcie > 0) cJSON_AddNumberToObject(o, "pcie_gbps", (double)(long)(pcie * 100 + 0.5) / 100); // 2 decimals
    else cJSON_AddNullToObject(o, "pcie_gbps");
    free(t);

    cJSON_AddItemToObject(o, "hardware_profile", str_or_null(hardware_profile));
    char utc[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(o, "utc", utc);
    *out = o;
    return MT_OK;
}

char *mt_env_json_string(const char *hardware_profile) {
    cJSON *o = NULL;
    if (mt_env_collect(hardware_profile, &o) != MT_OK) return NULL;
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
