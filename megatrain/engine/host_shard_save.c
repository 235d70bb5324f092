// host_shard_save.c: the per-host save (host_shard_save.h); its load is host_shard_load.c. Every host runs the
// same collectives in the same order (setup, the weights' rounds, the agreements), whatever its
// own writes did, so a failure on one host is agreed by all and never leaves one waiting.
#include "engine/host_shard_save.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file_io.h"
#include "core/json_file.h"
#include "engine/hosts.h"

#define SLICES_FORMAT "megatrain-host-slices"

static const char *private_dir(int me);

static const char *UNSHARED_HINT =
    "HINT: put --save on a filesystem every host mounts at the same path (NFS, Lustre, ...), or give "
    "--save-layout host0 to have host 0 write the whole checkpoint";

// One piece: the elements [start, stop) of tensor NAME's exp_avg or exp_avg_sq that host `host` owns.
typedef struct {
    char name[256];   // NAME.exp_avg[START:STOP]
    char tensor[256]; // NAME.exp_avg
    size_t start, stop;
    int host;
    int file;          // its optimizer file, 0-based among all hosts' (number_files)
    const float *data; // in this host's memory (its own pieces only are read from it)
} piece;

// Every host's pieces, host after host (the order of the CRC exchange). NULL out: count only.
static mt_status all_pieces(const mt_model *m, int H, piece *out, int *n, int *per_host_min) {
    char hf[224]; // with ".exp_avg_sq" and the range, within a record's 256
    int k = 0, fewest = -1;
    for (int h = 0; h < H; h++) {
        int mine = 0;
        for (int ui = 0; ui < m->n_units; ui++) {
            const mt_unit *u = &m->units[ui];
            size_t off, cnt;
            mt_host_shard_range(u->lay->numel, H, h, &off, &cnt);
            for (int t = 0; t < MT_T_COUNT; t++) {
                const mt_tensor_slot *v = &u->lay->t[t];
                if (!v->present) continue;
                size_t a = off > v->offset ? off : v->offset;
                size_t b = off + cnt < v->offset + v->numel ? off + cnt : v->offset + v->numel;
                if (a >= b) continue;
                mt_layout_hf_name(u->lay, (mt_tensor_id)t, u->layer, hf, sizeof hf);
                for (int q = 0; q < 2; q++, k++, mine++) {
                    if (!out) continue;
                    piece *p = &out[k];
                    p->start = a - v->offset, p->stop = b - v->offset, p->host = h;
                    p->data = (q == 0 ? u->m : u->v) + a;
                    snprintf(p->tensor, sizeof p->tensor, "%s%s", hf, q == 0 ? ".exp_avg" : ".exp_avg_sq");
                    if (snprintf(p->name, sizeof p->name, "%s[%zu:%zu]", p->tensor, p->start, p->stop) >=
                        (int)sizeof p->name)
                        return mt_fail(MT_ERR_ARG, "several hosts' save: the piece name of %s is too long", p->tensor);
                }
            }
        }
        if (fewest < 0 || mine < fewest) fewest = mine;
    }
    *n = k;
    if (per_host_min) *per_host_min = fewest;
    return MT_OK;
}

static void optimizer_file(int f, int n_files, char *out, size_t cap) {
    mt_st_shard_name("optimizer", f, n_files, out, cap);
}

// Pieces as entries to write (1-D F32 runs of this host's moments).
static mt_st_entry *piece_entries(const piece *P, int n) {
    mt_st_entry *e = calloc((size_t)(n ? n : 1), sizeof *e);
    for (int i = 0; e && i < n; i++) {
        e[i].name = P[i].name;
        e[i].dtype = e[i].file_dtype = MT_F32;
        e[i].ndim = 1;
        e[i].shape[0] = (int64_t)(P[i].stop - P[i].start);
        e[i].data = P[i].data;
    }
    return e;
}

// Each host's pieces cut into files of --shard-size as one host cuts its tensors, numbered
// host after host: every host numbers every host's files the same (a function of the model,
// H and the size), so the names need no exchange.
static mt_status number_files(piece *P, int np, size_t shard_bytes, int *n_files) {
    int base = 0;
    for (int first = 0, n; first < np; first += n) {
        for (n = 0; first + n < np && P[first + n].host == P[first].host;) n++;
        mt_st_entry *e = piece_entries(P + first, n);
        mt_st_shard_plan plan;
        mt_status s = e ? mt_st_shard_plan_make(e, n, shard_bytes, "optimizer", &plan)
                        : mt_fail(MT_ERR_MEMORY, "several hosts' save: out of memory");
        free(e);
        MT_TRY(s);
        for (int i = 0; i < n; i++) P[first + i].file = base + plan.shard_of[i];
        base += plan.n_shards;
        mt_st_shard_plan_free(&plan);
    }
    *n_files = base;
    return MT_OK;
}

// optimizer.safetensors.index.json: HF's {metadata, weight_map} and "slices".
static mt_status write_optimizer_index(const char *dir, const piece *P, int np, int H, int n_files) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    char num[32], file[64], path[4400];
    size_t total = 0;
    for (int i = 0; i < np; i++) total += (P[i].stop - P[i].start) * sizeof(float);
    snprintf(num, sizeof num, "%zu", total);
    cJSON_AddItemToObject(meta, "total_size", cJSON_CreateRaw(num));
    cJSON_AddStringToObject(meta, "format", SLICES_FORMAT);
    cJSON_AddNumberToObject(meta, "hosts", H);
    cJSON *wm = cJSON_AddObjectToObject(root, "weight_map");
    cJSON *sl = cJSON_AddObjectToObject(root, "slices");
    for (int i = 0; i < np; i++) {
        optimizer_file(P[i].file, n_files, file, sizeof file);
        cJSON_AddStringToObject(wm, P[i].name, file);
        cJSON *o = cJSON_AddObjectToObject(sl, P[i].name);
        cJSON_AddStringToObject(o, "tensor", P[i].tensor);
        snprintf(num, sizeof num, "%zu", P[i].start);
        cJSON_AddItemToObject(o, "start", cJSON_CreateRaw(num));
        snprintf(num, sizeof num, "%zu", P[i].stop);
        cJSON_AddItemToObject(o, "stop", cJSON_CreateRaw(num));
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    snprintf(path, sizeof path, "%s/optimizer.safetensors.index.json", dir);
    if (!text) return mt_fail(MT_ERR_MEMORY, "%s: cannot format", path);
    mt_status s = mt_file_write_atomic(path, text, strlen(text));
    free(text);
    return s;
}

// This host's optimizer files: its own pieces P[0, n), file after file.
static mt_status write_optimizer_part(const char *dir, const piece *P, int n, int n_files, uint32_t *crcs) {
    mt_st_entry *e = piece_entries(P, n);
    if (!e) return mt_fail(MT_ERR_MEMORY, "%s: out of memory for the optimizer pieces", dir);
    char file[64], path[4400];
    mt_status s = MT_OK;
    for (int a = 0, k; a < n && s == MT_OK; a += k) {
        for (k = 0; a + k < n && P[a + k].file == P[a].file;) k++;
        optimizer_file(P[a].file, n_files, file, sizeof file);
        snprintf(path, sizeof path, "%s/%s", dir, file);
        s = mt_st_write_sums(path, e + a, k, crcs + a);
    }
    free(e);
    return s;
}

// The unit whose f32 master holds data, and where; 0 when none (no master: nothing to gather).
static int master_of(const mt_model *m, const void *data, int *unit, size_t *at) {
    for (int u = 0; u < m->n_units; u++) {
        const float *x = m->units[u].master, *p = data;
        if (x && p >= x && p < x + m->units[u].lay->numel) {
            *unit = u, *at = (size_t)(p - x);
            return 1;
        }
    }
    return 0;
}

// In mixed a weights file holds the f32 master, sharded: its writer completes each tensor just
// before writing it. The hosts write different files at once, so a gather is a round: every
// host says which tensor it writes next (none: done), and each named tensor's master is
// gathered to its writer; rounds go on until no host names one. A writer holds one tensor
// more, as host 0 does in the host0 layout.
typedef struct {
    const mt_model_shards *s;
    const mt_st_entry *W;
    int nw;
    int *next; // per host: entry + 1, 0 for none
} master_rounds;

static size_t entry_numel(const mt_st_entry *e) {
    return (size_t)e->shape[0] * (size_t)(e->ndim > 1 ? e->shape[1] : 1);
}

static mt_status master_round(const master_rounds *c, int mine, int *none) {
    mt_hosts *h = c->s->hosts;
    const mt_model *m = c->s->m;
    for (int p = 0; p < h->n; p++) c->next[p] = p == h->rank ? mine + 1 : 0;
    MT_TRY(h->agree_max(h, c->next, h->n));
    *none = 1;
    for (int p = 0; p < h->n; p++) {
        int u, i = c->next[p] - 1;
        size_t at;
        if (i < 0 || i >= c->nw || !master_of(m, c->W[i].data, &u, &at)) continue;
        *none = 0;
        const mt_unit *x = &m->units[u];
        MT_TRY(h->gather_to(h, x->master, sizeof(float), x->lay->numel, at, at + entry_numel(&c->W[i]), p));
    }
    return MT_OK;
}

static mt_status master_fetch(const void *ctx, const void *data, size_t numel) {
    const master_rounds *c = ctx;
    int none, i = 0;
    (void)numel;
    while (i < c->nw && c->W[i].data != data) i++;
    return master_round(c, i < c->nw ? i : -1, &none);
}

static void master_drop(const void *ctx, const void *data, size_t numel) {
    mt_host_shard_drop(((const master_rounds *)ctx)->s, data, numel); // the pages outside this host's slice
}

// The weights: file k by host k % H. W's entries get the rounds' callbacks in mixed.
static mt_status write_weights(const mt_model_shards *s, const char *wdir, mt_st_entry *W, int nw,
                               const mt_st_shard_plan *plan, uint32_t *crcs, mt_status *own) {
    const int H = s->hosts->n, me = s->hosts->rank;
    int u, none = 0, mixed = nw > 0 && master_of(s->m, W[0].data, &u, &(size_t){0});
    master_rounds c = {s, W, nw, calloc((size_t)H, sizeof(int))};
    if (!c.next) return mt_fail(MT_ERR_MEMORY, "several hosts' save: out of memory");
    for (int i = 0; i < nw && mixed; i++) W[i].fetch = master_fetch, W[i].drop = master_drop, W[i].ctx = &c;
    for (int k = me; k < plan->n_shards && *own == MT_OK; k += H)
        *own = mt_st_write_shard(wdir, "model", W, nw, plan, k, crcs);
    mt_status st = MT_OK;
    while (mixed && st == MT_OK && !none) st = master_round(&c, -1, &none); // the others' tensors, to the end
    free(c.next);
    return st;
}

// Every file of the save, seen from this host; the first one missing named.
static mt_status check_visible(const char *dir, int n_weight_files, int H, const piece *P, int np, int n_files,
                               int me) {
    char name[300], path[4400];
    struct stat sb;
    int n = n_weight_files + n_files + 1 + (n_weight_files > 1), p = 0;
    for (int i = 0; i < n; i++) {
        int owner = 0;
        if (i < n_weight_files) {
            mt_st_shard_name("model", i, n_weight_files, name, sizeof name);
            owner = i % H;
        } else if (i < n_weight_files + n_files) {
            int f = i - n_weight_files;
            while (p < np && P[p].file < f) p++;
            optimizer_file(f, n_files, name, sizeof name);
            owner = p < np ? P[p].host : 0;
        } else {
            snprintf(name, sizeof name, i == n_weight_files + n_files ? "optimizer.safetensors.index.json"
                                                                      : "model.safetensors.index.json");
        }
        snprintf(path, sizeof path, "%s/%s", dir, name);
        if (stat(path, &sb) != 0)
            return mt_fail(MT_ERR_IO, "%s: written by host %d, but host %d cannot see it after every host wrote "
                                      "(%s): the --save directory is not shared by the hosts. %s",
                           path, owner, me, strerror(errno), UNSHARED_HINT);
    }
    return MT_OK;
}

static mt_status records_of(const mt_st_entry *W, int nw, const mt_st_shard_plan *plan, const piece *P, int np,
                            int n_files, const double *crc, mt_tensor_records *wr, mt_tensor_records *mr) {
    wr->t = calloc((size_t)(nw ? nw : 1), sizeof *wr->t);
    mr->t = calloc((size_t)(np ? np : 1), sizeof *mr->t);
    if (!wr->t || !mr->t) return mt_fail(MT_ERR_MEMORY, "several hosts' save: out of memory for the records");
    for (int i = 0; i < nw; i++) {
        mt_tensor_record *r = &wr->t[wr->n++];
        snprintf(r->name, sizeof r->name, "%s", W[i].name);
        mt_st_shard_name("model", plan->shard_of[i], plan->n_shards, r->file, sizeof r->file);
        r->dtype = W[i].file_dtype;
        r->ndim = W[i].ndim;
        r->shape[0] = W[i].shape[0];
        r->shape[1] = W[i].shape[1];
        r->crc32 = (uint32_t)crc[i];
    }
    for (int i = 0; i < np; i++) {
        mt_tensor_record *r = &mr->t[mr->n++];
        snprintf(r->name, sizeof r->name, "%s", P[i].name);
        optimizer_file(P[i].file, n_files, r->file, sizeof r->file);
        r->dtype = MT_F32;
        r->ndim = 1;
        r->shape[0] = (int64_t)(P[i].stop - P[i].start);
        r->crc32 = (uint32_t)crc[nw + i];
    }
    mt_tensor_records_sort(wr);
    mt_tensor_records_sort(mr);
    return MT_OK;
}

// This host's vote for an agreement: me + 1 if own failed, 0 if not. Another host says why at
// once, before the agreement lets host 0 end the run (which may take this process down).
static int vote(mt_status own, int me, int *said) {
    if (own == MT_OK) return 0;
    if (me > 0 && !*said) fprintf(stderr, "megatrain: host %d: %s\n", me, mt_last_error());
    *said = 1;
    return me + 1;
}

// The save, on every host. Host 0's status is the save's; another host's own failure is on
// its stderr and in the agreement, so host 0 fails naming it.
static mt_status save_collective(const mt_model_shards *s, const char *dir, size_t shard_bytes,
                                 mt_tensor_records *wrec, mt_tensor_records *mrec) {
    mt_hosts *h = s->hosts;
    const mt_model *m = s->m;
    const int H = h->n, me = h->rank;
    mt_st_entry *W = NULL;
    char(*wn)[256] = NULL;
    int nw = 0, np = 0, fewest = 0, first = 0, mine = 0, n_files = 0, said = 0;
    mt_st_shard_plan plan = {0};
    piece *P = NULL;
    uint32_t *wcrc = NULL, *pcrc = NULL;
    double *crc = NULL;
    // Test hook: hosts past 0 write into this directory instead, as if --save were on their own disk.
    const char *wdir = private_dir(me) ? private_dir(me) : dir;

    mt_status own = mt_model_weight_entries(m, &W, &wn, &nw);
    for (int i = 0; i < nw && own == MT_OK; i++) W[i].fetch = NULL, W[i].drop = NULL; // gathered by round here
    if (own == MT_OK) own = mt_st_shard_plan_make(W, nw, shard_bytes, "model", &plan);
    if (own == MT_OK) own = all_pieces(m, H, NULL, &np, &fewest);
    if (own == MT_OK && fewest == 0)
        own = mt_fail(MT_ERR_ARG, "several hosts' save: with %d hosts one owns no element of any unit (a model this "
                                  "small): HINT: --save-layout host0", H);
    if (own == MT_OK) {
        P = calloc((size_t)np, sizeof *P);
        wcrc = calloc((size_t)(nw ? nw : 1), sizeof *wcrc);
        pcrc = calloc((size_t)np, sizeof *pcrc);
        crc = calloc((size_t)(nw + np), sizeof *crc);
        own = P && wcrc && pcrc && crc ? all_pieces(m, H, P, &np, NULL)
                                       : mt_fail(MT_ERR_MEMORY, "several hosts' save: out of memory");
    }
    if (own == MT_OK) own = number_files(P, np, shard_bytes, &n_files);
    if (own == MT_OK && wdir != dir) own = mt_make_dir(wdir, "MT_FAULT_SAVE_PRIVATE_DIR");
    int v[2] = {vote(own, me, &said), 0}; // a setup that failed anywhere: no collective of the writes
    mt_status cs = h->agree_max(h, v, 1);
    if (cs == MT_OK && v[0] == 0) {
        while (first < np && P[first].host < me) first++;
        while (first + mine < np && P[first + mine].host == me) mine++;
        cs = write_weights(s, wdir, W, nw, &plan, wcrc, &own);
        if (cs == MT_OK && own == MT_OK) own = write_optimizer_part(wdir, P + first, mine, n_files, pcrc);
        if (cs == MT_OK && own == MT_OK && me == 0) own = mt_st_write_index(wdir, "model", W, nw, &plan);
        if (cs == MT_OK && own == MT_OK && me == 0) own = write_optimizer_index(wdir, P, np, H, n_files);
        v[0] = vote(own, me, &said);
        if (cs == MT_OK) cs = h->agree_max(h, v, 1); // every host wrote (or failed): a barrier
        if (cs == MT_OK && v[0] == 0) {
            own = check_visible(dir, plan.n_shards, H, P, np, n_files, me);
            v[1] = vote(own, me, &said);
            cs = h->agree_max(h, v + 1, 1);
        }
    }
    if (cs == MT_OK && v[0] == 0 && v[1] == 0) { // every CRC to every host: each slot has one writer
        for (int i = 0; i < nw; i++) crc[i] = plan.shard_of[i] % H == me ? (double)wcrc[i] : 0.0;
        for (int i = 0; i < mine; i++) crc[nw + first + i] = (double)pcrc[i];
        cs = h->sum_f64(h, crc, nw + np);
        if (cs == MT_OK && me == 0 && wrec && mrec) own = records_of(W, nw, &plan, P, np, n_files, crc, wrec, mrec);
    }
    if (cs != MT_OK) own = cs;
    else if (own != MT_OK && me > 0) (void)vote(own, me, &said); // said before the agreement, or now (the CRCs)
    else if (own == MT_OK && v[1]) // another host could not see the files
        own = mt_fail(MT_ERR_IO, "%s: host %d cannot see the files the other hosts wrote (its line \"megatrain: host "
                                 "%d: ...\" names one): the --save directory is not shared by the hosts. %s",
                      dir, v[1] - 1, v[1] - 1, UNSHARED_HINT);
    else if (own == MT_OK && v[0])
        own = mt_fail(MT_ERR_IO, "%s: host %d could not write its part of the checkpoint (its line \"megatrain: host "
                                 "%d: ...\" says why)", dir, v[0] - 1, v[0] - 1);
    mt_st_shard_plan_free(&plan);
    free(W);
    free(wn);
    free(P);
    free(wcrc);
    free(pcrc);
    free(crc);
    return own;
}

mt_status mt_host_shard_save(const mt_model_shards *s, const char *dir, size_t shard_bytes,
                             mt_tensor_records *weights, mt_tensor_records *moments) {
    size_t len = strlen(dir), words = len / 8 + 1;
    uint64_t cmd[5] = {2, len, shard_bytes, 0, 0};
    uint64_t *path = calloc(words, sizeof *path);
    if (!path) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", dir);
    memcpy(path, dir, len);
    mt_status st = s->hosts->bcast_u64(s->hosts, cmd, 5);
    if (st == MT_OK) st = s->hosts->bcast_u64(s->hosts, path, (int)words);
    free(path);
    MT_TRY(st);
    return save_collective(s, dir, shard_bytes, weights, moments);
}

mt_status mt_host_shard_save_follow(const mt_model_shards *s, const uint64_t cmd[5]) {
    size_t len = (size_t)cmd[1], words = len / 8 + 1;
    uint64_t *path = calloc(words + 1, sizeof *path);
    if (!path) return mt_fail(MT_ERR_MEMORY, "several hosts' save: out of memory");
    mt_status st = s->hosts->bcast_u64(s->hosts, path, (int)words);
    ((char *)path)[len] = 0;
    if (st == MT_OK) save_collective(s, (const char *)path, (size_t)cmd[2], NULL, NULL);
    free(path);
    return st; // the save's own failure is host 0's to report
}

// Where this host writes: --save's, or with the test hook a directory of its own (host 0 excepted).
static const char *private_dir(int me) {
    const char *d = me > 0 ? getenv("MT_FAULT_SAVE_PRIVATE_DIR") : NULL;
    return d && *d ? d : NULL;
}

// Host 0's string to every host (s: host 0's, NULL elsewhere); *out malloc'd.
static mt_status bcast_string(mt_hosts *h, const char *s, char **out) {
    uint64_t len = s ? strlen(s) : 0;
    MT_TRY(h->bcast_u64(h, &len, 1));
    size_t words = (size_t)len / 8 + 1;
    uint64_t *w = calloc(words, sizeof *w);
    if (!w) return mt_fail(MT_ERR_MEMORY, "several hosts: out of memory");
    if (s) memcpy(w, s, (size_t)len);
    mt_status st = h->bcast_u64(h, w, (int)words);
    ((char *)w)[len] = 0; // words * 8 > len
    if (st != MT_OK) free(w);
    else *out = (char *)w;
    return st;
}

mt_status mt_host_shard_check_shared(const mt_model_shards *s, const char *parent, const char *name) {
    mt_hosts *h = s->hosts;
    const int H = h->n, me = h->rank;
    char mine[4400], path[4400], *prefix = NULL;
    if (me == 0) snprintf(path, sizeof path, "%s/.%s.hosts-%ld", parent, name, (long)getpid());
    MT_TRY(bcast_string(h, me == 0 ? path : NULL, &prefix));
    const char *base = strrchr(prefix, '/') ? strrchr(prefix, '/') + 1 : prefix;
    if (private_dir(me)) snprintf(mine, sizeof mine, "%s/%s-%d", private_dir(me), base, me);
    else snprintf(mine, sizeof mine, "%s-%d", prefix, me);
    mt_status own = private_dir(me) ? mt_make_dir(private_dir(me), "MT_FAULT_SAVE_PRIVATE_DIR") : MT_OK;
    if (own == MT_OK) own = mt_file_write_atomic(mine, "", 0);
    int v[2] = {own != MT_OK ? me + 1 : 0, 0};
    mt_status cs = h->agree_max(h, v, 1); // every host made its file (a barrier)
    for (int p = 0; cs == MT_OK && v[0] == 0 && p < H && own == MT_OK; p++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s-%d", prefix, p);
        if (stat(path, &sb) != 0)
            own = mt_fail(MT_ERR_IO, "--save: host %d cannot see %s, which host %d made beside the --save directory "
                                     "(%s): the hosts do not share it. %s",
                          me, path, p, strerror(errno), UNSHARED_HINT);
    }
    v[1] = own != MT_OK ? me + 1 : 0;
    if (cs == MT_OK && v[0] == 0) cs = h->agree_max(h, v + 1, 1); // every host looked: each removes its own
    (void)unlink(mine);
    free(prefix);
    if (cs != MT_OK) return cs;
    if (own != MT_OK) return own;
    if (v[0] || v[1])
        return mt_fail(MT_ERR_IO, "--save: host %d %s: the hosts do not share the --save directory (its own error "
                                  "says why). %s", (v[0] ? v[0] : v[1]) - 1,
                       v[0] ? "could not make a file beside it" : "cannot see the others' files beside it",
                       UNSHARED_HINT);
    return MT_OK;
}
