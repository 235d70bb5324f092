// shim.cc: Google Benchmark glue for the C benchmarks (mb.h) and main().
// Output defaults to JSON (--benchmark_format=json) with a short minimum time
// (--benchmark_min_time=0.05); both can be overridden on the command line.
// The results `env` block goes into the JSON "context" as the string "mt_env"
// (Google Benchmark's custom context holds strings only): read it with
//   jq '.context.mt_env | fromjson'
// and the host optimizer's vector path as "mt_adamw_isa" (avx512, avx2, sve, neon, scalar).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

extern "C" {
#include "env.h"
#include "mb.h"
#include "optim/adamw.h"
}

struct mt_mb_state {
    benchmark::State *st;
};

extern "C" int mt_mb_keep_running(mt_mb_state *s) { return s->st->KeepRunning(); }
extern "C" int64_t mt_mb_iterations(mt_mb_state *s) { return (int64_t)s->st->iterations(); }
extern "C" void mt_mb_pause(mt_mb_state *s) { s->st->PauseTiming(); }
extern "C" void mt_mb_resume(mt_mb_state *s) { s->st->ResumeTiming(); }
extern "C" void mt_mb_set_iteration_time(mt_mb_state *s, double seconds) { s->st->SetIterationTime(seconds); }
extern "C" void mt_mb_set_bytes_processed(mt_mb_state *s, double bytes) { s->st->SetBytesProcessed((int64_t)bytes); }
extern "C" void mt_mb_set_label(mt_mb_state *s, const char *label) { s->st->SetLabel(label); }
extern "C" void mt_mb_error(mt_mb_state *s, const char *msg) { s->st->SkipWithError(msg); }

extern "C" void mt_mb_counter(mt_mb_state *s, const char *name, double value, int flags) {
    int f = benchmark::Counter::kDefaults;
    if (flags & MT_MB_RATE) f |= benchmark::Counter::kIsRate;
    if (flags & MT_MB_AVG) f |= benchmark::Counter::kAvgIterations;
    s->st->counters[name] = benchmark::Counter(value, (benchmark::Counter::Flags)f);
}

static std::map<std::string, std::string> &notes() {
    static std::map<std::string, std::string> m;
    return m;
}

extern "C" void mt_mb_note(const char *key, const char *value) {
    std::string &v = notes()[key];
    if (!v.empty()) v += "; ";
    v += value;
}

extern "C" void mt_mb_register(const char *name, mt_mb_fn fn, const void *user, const int64_t *args, int nargs,
                               int flags) {
    std::vector<int64_t> a(args, args + (nargs > 4 ? 4 : nargs));
    benchmark::internal::Benchmark *b = benchmark::RegisterBenchmark(name, [fn, user, nargs](benchmark::State &st) {
        mt_mb_state s{&st};
        int64_t r[4] = {0, 0, 0, 0};
        for (int i = 0; i < nargs && i < 4; i++) r[i] = st.range(i);
        fn(&s, r, user);
    });
    if (!a.empty()) b->Args(a);
    if (flags & MT_MB_MANUAL_TIME) b->UseManualTime();
    else b->UseRealTime();
    if (flags & MT_MB_ONE_ITER) b->Iterations(1);
    b->Unit(benchmark::kMillisecond);
}

static bool has_flag(int argc, char **argv, const char *prefix) {
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], prefix, strlen(prefix))) return true;
    return false;
}

int main(int argc, char **argv) {
    std::vector<char *> args(argv, argv + argc);
    static char fmt[] = "--benchmark_format=json", min_time[] = "--benchmark_min_time=0.05";
    if (!has_flag(argc, argv, "--benchmark_format")) args.insert(args.begin() + 1, fmt);
    if (!has_flag(argc, argv, "--benchmark_min_time")) args.insert(args.begin() + 1, min_time);
    int n = (int)args.size();
    args.push_back(nullptr);
    bool listing = has_flag(argc, argv, "--benchmark_list_tests");

    mt_mb_register_host();
    mt_mb_register_adamw();
    mt_mb_register_adamw_unit();
    mt_mb_register_grad_sumsq();
    mt_mb_register_gemm();
    mt_mb_register_gemm_bwd();
    mt_mb_register_kernels();
    mt_mb_register_attention();
    mt_mb_register_copy();
    mt_mb_register_layer();
    mt_mb_register_launch();
    mt_mb_register_host_contention();

    char *env = listing ? nullptr : mt_env_json_string(NULL);
    benchmark::AddCustomContext("mt_schema", "megatrain.microbench/1");
    benchmark::AddCustomContext("mt_env", env ? env : "null");
    benchmark::AddCustomContext("mt_adamw_isa", mt_adamw_isa());
    free(env);
    for (auto &kv : notes()) {
        benchmark::AddCustomContext(kv.first, kv.second);
        fprintf(stderr, "mt-microbench: %s: %s\n", kv.first.c_str(), kv.second.c_str());
    }
    benchmark::Initialize(&n, args.data());
    if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
    size_t ran = benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    mt_mb_backends_release();
    if (ran == 0 && !listing) {
        fprintf(stderr, "mt-microbench: no benchmark matched --benchmark_filter\n");
        return 1;
    }
    return 0;
}
