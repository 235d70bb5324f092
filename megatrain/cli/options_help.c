// options_help.c: `megatrain CMD --help` from the option table: each option the
// command takes, its value, one line of help and its default, read from
// mt_options_defaults (hence mt_engine_opts_defaults), so no number here goes stale.
// And the nearest known option to a mistyped one (edit distance).
#include <stdio.h>
#include <string.h>

#include "cli/options.h"
#include "cli/options_spec.h"

// The options a command cannot run without (the rest have defaults).
static const struct {
    char cmd;
    const char *name, *note;
} required[] = {
    {'t', "--model", "one of --model, --config, --resume is required"},
    {'t', "--config", "one of --model, --config, --resume is required"},
    {'t', "--resume", "one of --model, --config, --resume is required"},
    {'e', "--model", "required"},
    {'e', "--data", "required"},
    {'p', "--model", "one of --model, --config is required"},
    {'p', "--config", "one of --model, --config is required"},
};

static const char *required_note(char cmd, const char *name) {
    for (size_t i = 0; i < sizeof required / sizeof *required; i++)
        if (required[i].cmd == cmd && !strcmp(required[i].name, name)) return required[i].note;
    return NULL;
}

// Where a command reads an option its own way (eval reads a token file, windows of it).
static const struct {
    char cmd;
    const char *name, *arg, *help;
} own[] = {
    {'e', "--data", "FILE", "tokens: a flat uint32 file"},
    {'e', "--batch", "B", "rows per batch window"},
    {'e', "--steps", "N", "batch windows to read, from the file's start"},
};

static const opt_spec *as_cmd_reads(const opt_spec *s, char cmd, opt_spec *buf) {
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (own[i].cmd == cmd && !strcmp(own[i].name, s->name)) {
            *buf = *s;
            buf->arg = own[i].arg;
            buf->help = own[i].help;
            return buf;
        }
    return s;
}

static const char *tri(int v) { return v < 0 ? "auto" : v ? "true" : "false"; }

// The default of s in d as the command line would spell it.
static void default_text(const opt_spec *s, const mt_options *d, char cmd, char *buf, size_t cap) {
    const void *f = (const char *)d + s->offset;
    if (cmd == 'e' && !strcmp(s->name, "--steps")) {
        snprintf(buf, cap, "every batch window of --data");
        return;
    }
    switch (s->kind) {
    case OPT_STR: snprintf(buf, cap, "%s", *(const char *const *)f ? *(const char *const *)f : "none"); return;
    case OPT_GPUS:
        if (*(const int *)f == 0) {
            snprintf(buf, cap, "auto");
            return;
        }
        /* fall through */
    case OPT_BATCH:
    case OPT_POS_INT:
    case OPT_NONNEG_INT:
        if (!strcmp(s->name, "--update-parts") && *(const int *)f == 0)
            snprintf(buf, cap, "%d, the schedule's", MT_UPDATE_PARTS);
        else if (!strcmp(s->name, "--save-every") && *(const int *)f == 0)
            snprintf(buf, cap, "none, at the end only");
        else snprintf(buf, cap, "%d", *(const int *)f);
        return;
    case OPT_U64: snprintf(buf, cap, "%llu", *(const unsigned long long *)f); return;
    case OPT_NONNEG_FLOAT:
    case OPT_POS_FLOAT:
    case OPT_UNIT_FLOAT: {
        float x = *(const float *)f;
        if (x == 0 && !strcmp(s->name, "--host-mem-gb")) snprintf(buf, cap, "the profile's");
        else if (x == 0 && !strcmp(s->name, "--tokens-per-day")) snprintf(buf, cap, "none");
        else snprintf(buf, cap, "%g", (double)x);
        return;
    }
    case OPT_FLAG: snprintf(buf, cap, "off"); return;
    case OPT_BOOL: snprintf(buf, cap, "%s", *(const int *)f ? "true" : "false"); return;
    case OPT_TRISTATE: snprintf(buf, cap, "%s", tri(*(const int *)f)); return;
    case OPT_SCHEDULE: snprintf(buf, cap, "%s", (*(const mt_schedule_desc *const *)f)->name); return;
    case OPT_BIND: snprintf(buf, cap, "%s", *(const mt_bind_mode *)f == MT_BIND_COPY ? "copy" : "pointer"); return;
    case OPT_GRAD_SUM: snprintf(buf, cap, "%s", mt_grad_sum_name(*(const mt_grad_sum *)f)); return;
    case OPT_DEVOPT: {
        int n = *(const int *)f;
        if (n < 0) snprintf(buf, cap, "auto");
        else if (n == 0) snprintf(buf, cap, "off");
        else snprintf(buf, cap, "%d", n);
        return;
    }
    case OPT_RECOMPUTE: snprintf(buf, cap, "%s", mt_recompute_name(*(const mt_recompute *)f)); return;
    case OPT_BYTES: {
        unsigned long long b = *(const unsigned long long *)f;
        snprintf(buf, cap, "%llu bytes (%gGB)", b, (double)b / 1e9);
        return;
    }
    case OPT_COUNT: snprintf(buf, cap, "%lld", *(const long long *)f); return;
    }
    snprintf(buf, cap, "-");
}

void mt_options_help(FILE *out, const char *cmd) {
    mt_options d;
    mt_options_defaults(&d);
    char c = cmd[0];
    for (size_t i = 0; i < mt_option_spec_count; i++) {
        opt_spec mine;
        const opt_spec *s = &mt_option_specs[i];
        if (!strchr(s->cmds, c)) continue;
        s = as_cmd_reads(s, c, &mine);
        char left[64], def[96];
        snprintf(left, sizeof left, "%s%s%s", s->name, *s->arg ? " " : "", s->arg);
        const char *req = required_note(c, s->name);
        if (req) snprintf(def, sizeof def, "%s", req);
        else {
            char v[80];
            default_text(s, &d, c, v, sizeof v);
            snprintf(def, sizeof def, "default: %s", v);
        }
        fprintf(out, "  %-40s %s (%s)\n", left, s->help, def);
    }
}

// Levenshtein distance of a and b (both short: option names).
static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63) return 64;
    int row[64];
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[m];
}

const char *mt_option_nearest(const char *arg, const char *cmd) {
    const char *best = NULL;
    int best_d = 1 << 30;
    for (size_t i = 0; i < mt_option_spec_count; i++) {
        const opt_spec *s = &mt_option_specs[i];
        if (!strchr(s->cmds, cmd[0])) continue; // suggest only what this command takes
        int dist = edit_distance(arg, s->name);
        if (dist < best_d) best_d = dist, best = s->name;
    }
    // Close enough to be a typo: a third of the name's letters at most (--seqlen, --lr-sched).
    size_t len = strlen(arg);
    return best && best_d <= (int)(len / 3 > 2 ? len / 3 : 2) ? best : NULL;
}
