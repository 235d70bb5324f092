// plan_summary.c: `megatrain plan` on a terminal: the plan's object as a few
// lines a person reads (what, fits or what is short, memory, predicted speed),
// read from the same JSON object a pipe gets, so the two never disagree.
#include "cli/plan_request.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

// Decimal bytes, as the profiles give memory (GB = 10^9).
static const char *bytes(double b, char *buf, size_t cap) {
    if (isnan(b)) snprintf(buf, cap, "-");
    else if (b >= 1e12) snprintf(buf, cap, "%.2f TB", b / 1e12);
    else if (b >= 1e9) snprintf(buf, cap, "%.1f GB", b / 1e9);
    else if (b >= 1e6) snprintf(buf, cap, "%.1f MB", b / 1e6);
    else snprintf(buf, cap, "%.0f kB", b / 1e3);
    return buf;
}

void mt_plan_print_summary(FILE *f, const cJSON *j) {
    char a[32], b[32], c[32], d[32], e[32];
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(j, "host"), *gpu = cJSON_GetObjectItemCaseSensitive(j, "gpu");
    const cJSON *hw = cJSON_GetObjectItemCaseSensitive(j, "hardware");
    fprintf(f, "plan: %s %.2fM params, %.0f layers | %s precision | %s schedule | batch %.0f x %.0f tokens, %.0f a step\n",
            str(j, "model_type"), num(j, "params") / 1e6, num(j, "layers"), str(j, "precision"), str(j, "schedule"),
            num(j, "batch"), num(j, "seq_len"), num(j, "grad_accum"));
    fprintf(f, "machine: %s%s%s%s\n", str(hw, "name"), cJSON_GetObjectItemCaseSensitive(hw, "gpu") ? " (" : "",
            cJSON_GetObjectItemCaseSensitive(hw, "gpu") ? str(hw, "gpu") : "",
            cJSON_GetObjectItemCaseSensitive(hw, "gpu") ? ")" : "");
    int gpu_checked = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(gpu, "checked"));
    fprintf(f, "memory: host %s of %s | pinned %s | GPU %s of %s\n", bytes(num(j, "host_bytes"), a, sizeof a),
            bytes(num(host, "have_bytes"), b, sizeof b), bytes(num(j, "pinned_bytes"), c, sizeof c),
            bytes(num(j, "gpu_bytes"), d, sizeof d),
            gpu_checked ? bytes(num(gpu, "have_bytes"), e, sizeof e) : "? (no GPU to check)");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits"))) {
        fprintf(f, "fits: yes\n");
    } else {
        fprintf(f, "fits: no");
        const cJSON *s;
        cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(j, "short"))
            fprintf(f, " | %s needs %s, has %s", str(s, "resource"), bytes(num(s, "need_bytes"), a, sizeof a),
                    bytes(num(s, "have_bytes"), b, sizeof b));
        fprintf(f, "\n");
    }
    if (!isnan(num(j, "step_ms")))
        fprintf(f, "predicted: %.4g ms/step | %.0f tokens/s | %.3g TFLOPS | MFU %.1f%% | bound by %s\n",
                num(j, "step_ms"), num(j, "tokens_per_s"), num(j, "tflops"), 100 * num(j, "mfu"), str(j, "bound"));
    else fprintf(f, "predicted: no speed without --hardware PROFILE\n");
    fprintf(f, "(the whole plan as JSON: --json, or pipe it)\n");
}
