// plan_compare.c: `megatrain plan --compare A,B,...`: one model and batch planned on
// several hardware profiles, side by side. Each column is exactly what
// `plan --hardware A` prints (mt_plan_of_options), plus a "compare" object: the sim's
// step on that profile (the planner's own sim pricing, sim_price.c) and how far the
// sim is trusted there (planner/sim_band.h). Stdout: one JSON line per profile, in
// the order given; stderr: the same as a table for a person to read.
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/plan_request.h"
#include "cli/run_setup.h"
#include "planner/sim_band.h"

#define MAX_PROFILES 32

typedef struct {
    char spec[256];          // as given: a name, a path or measured
    char key[PATH_MAX];      // what makes two entries the same profile: the file's real path
    cJSON *plan;
    mt_plan_built built;
    mt_sim_band band;
} column;

static int fail(mt_status s) {
    fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
    return s == MT_ERR_ARG ? 2 : 1;
}

// Re-states a profile error under --compare: "--hardware X: unknown profile (...)" names an
// option the user did not give.
static mt_status restate(mt_status s, const char *spec, int i, int n) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", mt_last_error()); // mt_fail writes the buffer it would read
    const char *m = msg;
    char pre[300];
    snprintf(pre, sizeof pre, "--hardware %s: ", spec);
    if (!strncmp(m, pre, strlen(pre))) m += strlen(pre);
    return mt_fail(s, "--compare %s (profile %d of %d): %s", spec, i + 1, n, m);
}

// Splits the list, refusing an empty entry, too many, and one profile twice (by file, so
// a name and a path to the same file are the same column).
static mt_status parse_list(const char *list, column *c, int *n) {
    *n = 0;
    for (const char *p = list;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0)
            return mt_fail(MT_ERR_ARG, "--compare '%s': entry %d is empty; give profile names or paths separated by "
                                       "single commas (e.g. h200-128g,gh200-480g)",
                           list, *n + 1);
        if (*n == MAX_PROFILES) return mt_fail(MT_ERR_ARG, "--compare: more than %d profiles", MAX_PROFILES);
        if (len >= sizeof c[*n].spec) return mt_fail(MT_ERR_ARG, "--compare: entry %d is too long", *n + 1);
        memcpy(c[*n].spec, p, len);
        c[*n].spec[len] = 0;
        (*n)++;
        if (!e) break;
        p = e + 1;
    }
    for (int i = 0; i < *n; i++) {
        char path[4096];
        if (!strcmp(c[i].spec, "measured")) snprintf(path, sizeof path, "measured");
        else if (mt_hw_profile_find(c[i].spec, path, sizeof path) != MT_OK) return restate(MT_ERR_ARG, c[i].spec, i, *n);
        if (!realpath(path, c[i].key)) snprintf(c[i].key, sizeof c[i].key, "%s", path); // a missing file fails its load
        for (int k = 0; k < i; k++)
            if (!strcmp(c[k].key, c[i].key))
                return mt_fail(MT_ERR_ARG, "--compare: %s is listed twice (entries %d and %d%s); list each profile once",
                               c[i].spec, k + 1, i + 1, strcmp(c[k].spec, c[i].spec) ? ", the same file" : "");
    }
    return MT_OK;
}

static double num(const cJSON *o, const char *path) { // "a.b": a number, or NAN
    char key[64];
    const cJSON *x = o;
    for (const char *p = path; x && *p;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        snprintf(key, sizeof key, "%.*s", (int)len, p);
        x = cJSON_GetObjectItemCaseSensitive(x, key);
        p = dot ? dot + 1 : p + len;
    }
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k1, const char *k2) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k1);
    if (k2) x = cJSON_GetObjectItemCaseSensitive(x, k2);
    return cJSON_IsString(x) ? x->valuestring : "-";
}

// The sim's step on this profile: the planner's pricing of the same inputs (what --batch auto
// checks its favourites with). Not for a plan that does not fit, a peer, or a profile without a file.
static void add_sim(column *c, cJSON *cmp) {
    const char *why = !c->built.profile_path[0] ? "no profile file (measured): the sim needs one"
                      : c->built.peer          ? "a peer: the planner checks peers with the closed form only"
                      : !c->built.fits         ? "does not fit: nothing to simulate"
                                               : NULL;
    double ms = 0;
    char err[512];
    if (!why && mt_plan_sim_step_ms(&c->built.cfg, &c->built.in, c->built.profile_path, &ms) != MT_OK) {
        snprintf(err, sizeof err, "the sim failed: %s", mt_last_error());
        why = err;
    }
    if (why) {
        cJSON_AddNullToObject(cmp, "sim_step_ms");
        cJSON_AddStringToObject(cmp, "sim_note", why);
        return;
    }
    cJSON_AddNumberToObject(cmp, "sim_step_ms", ms);
    cJSON_AddNumberToObject(cmp, "sim_tokens_per_s", num(c->plan, "tokens_per_step") / ms * 1e3);
    cJSON_AddNumberToObject(cmp, "sim_tflops", num(c->plan, "tflops") * num(c->plan, "step_ms") / ms); // same 6N FLOPs
}

static void add_band(const column *c, const mt_sim_validation *v, cJSON *cmp) {
    const mt_sim_band *b = &c->band;
    cJSON *j = cJSON_AddObjectToObject(cmp, "band");
    cJSON_AddStringToObject(j, "kind", b->kind_name);
    cJSON_AddStringToObject(j, "text", b->text);
    cJSON_AddStringToObject(j, "applies_to", "sim_step_ms (the sim's error against measured runs)");
    if (b->from) {
        cJSON_AddNumberToObject(j, "worst_abs_err", b->from->worst_abs_err);
        cJSON_AddNumberToObject(j, "median_abs_err", b->from->median_abs_err);
        cJSON_AddNumberToObject(j, "n", b->from->n);
        cJSON_AddNumberToObject(j, "within", b->from->within);
        cJSON_AddStringToObject(j, "validated_profile", b->from->profile);
        cJSON_AddStringToObject(j, "validated_gpu", b->from->gpu);
    }
    if (b->why[0]) cJSON_AddStringToObject(j, "why", b->why);
    if (v->path[0]) cJSON_AddStringToObject(j, "file", v->path);
    else cJSON_AddNullToObject(j, "file");
}

// ---------------------------------------------------------------------------
// The table (stderr): one column per profile, one row per figure.

#define LABEL_W 16

static size_t width(const char *s) { // display columns: UTF-8 continuation bytes take none
    size_t w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xC0) != 0x80;
    return w;
}

typedef struct {
    char cell[MAX_PROFILES][128]; // holds any GPU name a profile can carry (mt_hw_profile.gpu_name)
} row;

static void cell_bytes(char *out, size_t cap, double b) {
    if (isnan(b)) snprintf(out, cap, "-");
    else if (b >= 1e12) snprintf(out, cap, "%.2f TB", b / 1e12);
    else snprintf(out, cap, "%.1f GB", b / 1e9);
}

static void cell_num(char *out, size_t cap, const char *fmt, double x) {
    if (isnan(x)) snprintf(out, cap, "-");
    else snprintf(out, cap, fmt, x);
}

static void cell_fits(char *out, size_t cap, const cJSON *plan) {
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(plan, "fits"))) {
        snprintf(out, cap, "yes");
        return;
    }
    // The first resource short, need > have in GB (the JSON's "short" lists every one, in bytes).
    const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(plan, "short"), 0);
    snprintf(out, cap, "no: %s %.0f>%.0f GB", str(s, "resource", NULL), num(s, "need_bytes") / 1e9,
             num(s, "have_bytes") / 1e9);
}

// The split (--device-optimizer): its units and the step without it; off: what auto would give.
static void cell_devopt(char *out, size_t cap, const cJSON *d) {
    double units = num(d, "units"), off = num(d, "step_ms_off"), au = num(d, "auto.units"), as = num(d, "auto.step_ms");
    if (!d) snprintf(out, cap, "-");
    else if (units > 0) snprintf(out, cap, "%.0f units; off %.0f ms", units, off);
    else if (au > 0 && !isnan(as)) snprintf(out, cap, "off; auto %.0fu %.0f ms", au, as);
    else snprintf(out, cap, "off");
}

static void print_table(const column *c, int n, const mt_options *o, const mt_sim_validation *v) {
    enum { GPU, GPU_MEM, HOST_MEM, BATCH, STEP, SIM, TOKS, TFLOPS, MFU, BOUND, FITS, HOST_B, DEV_B, DEVOPT, BAND, NROWS };
    static const char *label[NROWS] = {"GPU", "GPU memory", "host memory", "batch", "step ms (plan)", "step ms (sim)",
                                       "tokens/s", "TFLOPS (6N)", "MFU", "bound", "fits", "host bytes", "device bytes",
                                       "GPU optimizer", "sim error band"};
    static row r[NROWS];
    for (int i = 0; i < n; i++) {
        const cJSON *p = c[i].plan, *cmp = cJSON_GetObjectItemCaseSensitive(p, "compare");
        size_t k = sizeof r[0].cell[0];
        snprintf(r[GPU].cell[i], k, "%s", str(p, "hardware", "gpu"));
        cell_bytes(r[GPU_MEM].cell[i], k, num(p, "gpu.mem_bytes"));
        cell_bytes(r[HOST_MEM].cell[i], k, num(p, "host.mem_bytes"));
        snprintf(r[BATCH].cell[i], k, "%.0f%s", num(p, "batch"), o->batch_auto ? " (auto)" : "");
        cell_num(r[STEP].cell[i], k, "%.0f", num(p, "step_ms"));
        cell_num(r[SIM].cell[i], k, "%.0f", num(cmp, "sim_step_ms"));
        cell_num(r[TOKS].cell[i], k, "%.0f", num(p, "tokens_per_s"));
        cell_num(r[TFLOPS].cell[i], k, "%.0f", num(p, "tflops"));
        cell_num(r[MFU].cell[i], k, "%.2f", num(p, "mfu"));
        snprintf(r[BOUND].cell[i], k, "%s", str(p, "bound", NULL));
        cell_fits(r[FITS].cell[i], k, p);
        cell_bytes(r[HOST_B].cell[i], k, num(p, "host_bytes"));
        cell_bytes(r[DEV_B].cell[i], k, num(p, "gpu_bytes"));
        cell_devopt(r[DEVOPT].cell[i], k, cJSON_GetObjectItemCaseSensitive(p, "device_optimizer"));
        snprintf(r[BAND].cell[i], k, "%s", c[i].band.cell);
    }
    size_t w[MAX_PROFILES];
    for (int i = 0; i < n; i++) { // as wide as its widest cell: a long GPU name is shown whole
        w[i] = width(c[i].spec);
        for (int k = 0; k < NROWS; k++)
            if (width(r[k].cell[i]) > w[i]) w[i] = width(r[k].cell[i]);
    }
    const cJSON *p0 = c[0].plan;
    fprintf(stderr, "plan --compare: %s (%.2fB params), %s precision, %s schedule, seq %.0f, batch %s: projections "
                    "on each profile (the planner's closed form; the sim's step where it ran), not measurements\n",
            str(p0, "config", NULL), num(p0, "params") / 1e9, str(p0, "precision", NULL), str(p0, "schedule", NULL),
            num(p0, "seq_len"), o->batch_auto ? "auto (per profile)" : r[BATCH].cell[0]);
    fprintf(stderr, "%-*s", LABEL_W, "");
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  %s%*s", c[i].spec, i + 1 < n ? (int)(w[i] - width(c[i].spec)) : 0, "");
    fputc('\n', stderr);
    for (int k = 0; k < NROWS; k++) {
        fprintf(stderr, "%-*s", LABEL_W, label[k]);
        for (int i = 0; i < n; i++) {
            const char *s = r[k].cell[i];
            fprintf(stderr, "  %s%*s", s, i + 1 < n ? (int)(w[i] - width(s)) : 0, "");
        }
        fputc('\n', stderr);
    }
    fprintf(stderr, "bound: what sets most of the step (compute, h2d, d2h: the link, optimizer: the host AdamW)\n");
    if (!v->path[0]) { // one line, not the same note per column
        fprintf(stderr, "sim error band: none yet: no results/sim_validation.json (the harness writes the sim's error "
                        "against measured runs there)\n");
        return;
    }
    fprintf(stderr, "sim error band: the sim's error against measured runs on that GPU (%s); it bounds the sim row\n",
            v->path);
    for (int i = 0; i < n; i++) {
        const mt_sim_band *b = &c[i].band;
        fprintf(stderr, "  %s: %s%s%s\n", c[i].spec, b->text, b->why[0] ? "; " : "", b->why);
    }
}

int mt_cmd_plan_compare(mt_options *o) {
    column *c = calloc(MAX_PROFILES, sizeof *c);
    if (!c) return fail(mt_fail(MT_ERR_MEMORY, "plan --compare: host memory"));
    int n = 0, rc = 0;
    mt_sim_validation *v = calloc(1, sizeof *v);
    mt_status s = v ? parse_list(o->compare, c, &n) : mt_fail(MT_ERR_MEMORY, "plan --compare: host memory");
    if (s == MT_OK) s = mt_sim_validation_load(v);
    // Every plan is built before anything is printed: a bad profile leaves no partial output.
    for (int i = 0; i < n && s == MT_OK; i++) {
        mt_options one = *o;
        one.compare = NULL;
        one.hardware = c[i].spec;
        if ((s = mt_plan_of_options(&one, &c[i].plan, &c[i].built))) {
            s = restate(s, c[i].spec, i, n);
            break;
        }
        mt_sim_band_of(v, c[i].built.hw.name, c[i].built.hw.gpu_name, &c[i].band);
        cJSON *cmp = cJSON_AddObjectToObject(c[i].plan, "compare");
        cJSON_AddNumberToObject(cmp, "position", i + 1);
        cJSON_AddNumberToObject(cmp, "profiles", n);
        cJSON_AddStringToObject(cmp, "profile", c[i].spec);
        add_sim(&c[i], cmp);
        add_band(&c[i], v, cmp);
    }
    char *txt[MAX_PROFILES] = {0};
    for (int i = 0; i < n && s == MT_OK; i++)
        if (!(txt[i] = cJSON_PrintUnformatted(c[i].plan))) s = mt_fail(MT_ERR_MEMORY, "plan: cannot format the JSON output");
    if (s == MT_OK) {
        print_table(c, n, o, v);
        // On a terminal the table (stderr) is what a person reads; the JSON lines: --json, or a pipe.
        for (int i = 0; i < n && mt_json_on_stdout(o); i++) printf("%s\n", txt[i]);
    } else {
        rc = fail(s);
    }
    for (int i = 0; i < n; i++) {
        free(txt[i]);
        cJSON_Delete(c[i].plan);
        mt_plan_built_free(&c[i].built);
    }
    free(v);
    free(c);
    return rc;
}
