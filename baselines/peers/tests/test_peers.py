"""CPU tests of baselines/peers (no GPU, no network).

    python3 -m unittest discover -s baselines/peers/tests -t . -v
    python3 -m pytest baselines/peers/tests          (if pytest is installed)

Needs torch, numpy and transformers; the DeepSpeed test runs only where
`import deepspeed` works (it JIT-builds the CPU Adam op, ~1 min the first time).
In CTest as harness_test_peers_cpu, with the first python that imports them (CI's
hf-venv from ci/install_hf_python.sh has torch and transformers, not DeepSpeed).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(PEERS))
os.environ["MT_ENV_NO_GIT"] = "1"  # never run git from the tests

import numpy as np
import torch

from .. import common

TINY = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
    "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
    "num_hidden_layers": 4, "vocab_size": 512, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
    "hidden_act": "silu", "torch_dtype": "bfloat16",
}


def qwen2_params(c, layers, tied):
    """Analytic parameter count of a Qwen2 model (q/k/v bias, untied unless tied)."""
    d, f, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = d // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    attn = d * d + d + 2 * (d * kv + kv) + d * d
    mlp = 3 * d * f
    per_layer = attn + mlp + 2 * d
    return V * d * (1 if tied else 2) + layers * per_layer + d


class TmpDir(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="peers_test_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write_config(self, **over):
        c = dict(TINY)
        c.update(over)
        p = os.path.join(self.tmp, "tiny-qwen2.json")
        with open(p, "w") as f:
            json.dump(c, f)
        return p

    def write_tokens(self, toks, name="toks.bin"):
        p = os.path.join(self.tmp, name)
        np.asarray(toks, dtype="<u4").tofile(p)
        return p


class TestBatching(TmpDir):
    """llm.c convention (docs/DESIGN.md#batching-loss-and-optimizer-semantics): windows of B*T+1, cursor += B*T, wrap to 0."""

    def test_llmc_windows_and_wrap(self):
        B, T = 2, 4
        p = self.write_tokens(np.arange(30))
        tb = common.TokenBatches(p, B, T, vocab_size=100)
        # reference implementation, straight from the convention
        cursor, toks = 0, np.arange(30)
        for _ in range(6):  # 30 tokens: windows at 0, 8, 16, then wrap (16+8+9 > 30) to 0
            if cursor + B * T + 1 > len(toks):
                cursor = 0
            w = toks[cursor:cursor + B * T + 1]
            x_ref = np.stack([w[j * T:(j + 1) * T] for j in range(B)])
            y_ref = np.stack([w[j * T + 1:(j + 1) * T + 1] for j in range(B)])
            cursor += B * T
            x, y = tb.next_batch()
            self.assertEqual(x.dtype, torch.int64)
            self.assertEqual(tuple(x.shape), (B, T))
            np.testing.assert_array_equal(x.numpy(), x_ref)
            np.testing.assert_array_equal(y.numpy(), y_ref)

    def test_exact_fit_restarts(self):
        B, T = 1, 4
        p = self.write_tokens(np.arange(9))  # exactly two windows? 0..4, 4..8, then 8+5 > 9
        tb = common.TokenBatches(p, B, T, vocab_size=16)
        self.assertEqual(tb.next_batch()[0].tolist(), [[0, 1, 2, 3]])
        self.assertEqual(tb.next_batch()[0].tolist(), [[4, 5, 6, 7]])
        self.assertEqual(tb.next_batch()[0].tolist(), [[0, 1, 2, 3]])

    def test_out_of_range_id(self):
        p = self.write_tokens([1, 2, 3, 999, 4, 5, 6, 7, 8, 9])
        tb = common.TokenBatches(p, 1, 4, vocab_size=100)
        with self.assertRaisesRegex(common.PeerError, "token id 999 at index 3 >= vocab_size 100"):
            tb.next_batch()

    def test_bad_files(self):
        with self.assertRaisesRegex(common.PeerError, "cannot read"):
            common.TokenBatches(os.path.join(self.tmp, "missing.bin"), 1, 4, 10)
        short = self.write_tokens([1, 2, 3], "short.bin")
        with self.assertRaisesRegex(common.PeerError, "B\\*T\\+1 = 9"):
            common.TokenBatches(short, 2, 4, 10)
        odd = os.path.join(self.tmp, "odd.bin")
        with open(odd, "wb") as f:
            f.write(b"\x00" * 10)
        with self.assertRaisesRegex(common.PeerError, "multiple of 4"):
            common.TokenBatches(odd, 1, 1, 10)

    def test_synthetic_same_windowing(self):
        tb = common.TokenBatches("synthetic", 3, 5, vocab_size=7, seed=3)
        x, y = tb.next_batch()
        self.assertTrue(int(x.max()) < 7 and int(x.min()) >= 0)
        np.testing.assert_array_equal(x[:, 1:].numpy(), y[:, :-1].numpy())
        np.testing.assert_array_equal(y[:-1, -1].numpy(), x[1:, 0].numpy())
        x2, _ = common.TokenBatches("synthetic", 3, 5, vocab_size=7, seed=3).next_batch()
        np.testing.assert_array_equal(x.numpy(), x2.numpy())


class TestMetrics(unittest.TestCase):
    def test_tflops_mfu(self):
        t = common.throughput(params=10**9, batch=8, seq_len=1024, step_ms_median=1000.0,
                              gpu_name="NVIDIA H100 80GB HBM3")
        self.assertAlmostEqual(t["tokens_per_s"], 8192.0)
        self.assertAlmostEqual(t["tflops"], 6 * 1e9 * 8192 / 1e12)  # 49.152
        self.assertAlmostEqual(t["mfu"], 49.152 / 989.0)
        self.assertAlmostEqual(common.throughput(10**9, 8, 1024, 500.0, "NVIDIA H100 PCIe")["mfu"],
                               98.304 / 756.0)

    def test_peaks(self):
        self.assertEqual(common.dense_peak_tflops("NVIDIA H100 80GB HBM3"), 989.0)
        self.assertEqual(common.dense_peak_tflops("NVIDIA H100 PCIe"), 756.0)
        self.assertEqual(common.dense_peak_tflops("NVIDIA H200"), 989.0)
        self.assertEqual(common.dense_peak_tflops("NVIDIA GH200 480GB"), 989.0)
        self.assertEqual(common.dense_peak_tflops("NVIDIA GeForce RTX 4090"), 165.2)  # harness/dense_peaks.json
        self.assertIsNone(common.dense_peak_tflops(None))
        self.assertIsNone(common.throughput(1, 1, 1, 1.0, None)["mfu"])

    def test_step_stats(self):
        s = common.step_stats_ms([1.0, 2.0, 3.0, 10.0, 5.0])
        self.assertEqual(s, {"median": 3000.0, "min": 1000.0, "max": 10000.0})


class TestResultsRow(TmpDir):
    def row(self, env):
        return common.make_row(
            experiment="peers", system="fsdp2_offload", model="tiny", params=1000, layers_run=2,
            layers_model=4, batch=2, seq_len=8, precision="mixed", step_times_s=[0.1, 0.2, 0.3, 0.2, 0.2],
            peak_gpu=None, peak_host=common.peak_host_bytes(), env=env)

    def test_exact_keys(self):
        env = common.collect_env()
        self.assertEqual(tuple(env), common.ENV_KEYS)
        r = self.row(env)
        self.assertEqual(tuple(r), common.RESULT_KEYS)
        self.assertEqual(tuple(r["env"]), common.ENV_KEYS)
        self.assertEqual(set(r["step_ms"]), {"median", "min", "max"})
        self.assertEqual(r["mode"], "measured")
        self.assertIsNone(r["gpu_busy_frac"])
        self.assertIsNone(r["h2d_gbps"])
        self.assertGreater(r["peak_host_bytes"], 0)
        self.assertEqual(r["schema"], common.SCHEMA)
        self.assertRegex(r["env"]["utc"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    def test_same_keys_as_the_team_fixtures(self):
        fx = os.path.join(ROOT, "ci", "tests", "results_ok.jsonl")
        if not os.path.exists(fx):
            self.skipTest("no ci/tests/results_ok.jsonl")
        with open(fx) as f:
            ref = json.loads(f.readline())
        r = self.row(common.collect_env())
        self.assertEqual(set(r), set(ref))
        self.assertEqual(set(r["env"]), set(ref["env"]))
        self.assertEqual(r["schema"], ref["schema"])

    def test_append_jsonl(self):
        out = os.path.join(self.tmp, "sub", "r.jsonl")
        r = self.row(common.collect_env())
        common.append_jsonl(out, r)
        common.append_jsonl(out, common.error_row(experiment="peers", system="deepspeed_zero3", model="tiny",
                                                  batch=2, seq_len=8, layers_run=2, error="exit 3: x"))
        with open(out) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(lines[0], json.loads(json.dumps(r)))
        self.assertEqual(lines[1]["error"], "exit 3: x")

    def test_env_from_fake_nvidia_smi(self):
        smi = os.path.join(self.tmp, "nvidia-smi")
        with open(smi, "w") as f:
            f.write("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559, 580.159.04, 00000000:19:00.0, 5, 16'\n")
        os.chmod(smi, 0o755)
        old = {k: os.environ.get(k) for k in ("MT_NVIDIA_SMI", "MT_GIT_SHA", "MT_GIT_DIRTY")}
        os.environ.update(MT_NVIDIA_SMI=smi, MT_GIT_SHA="0123456789ab", MT_GIT_DIRTY="1")
        try:
            e = common.collect_env()
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.assertEqual(e["gpu_name"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(e["gpu_mem_bytes"], 81559 * 1048576)
        self.assertEqual(e["driver"], "580.159.04")
        self.assertEqual(e["pcie_gbps"], 63.02)
        self.assertEqual(e["git_sha"], "0123456789ab")
        self.assertIs(e["git_dirty"], True)


class TestModel(TmpDir):
    def test_config_depth_truncation(self):
        p = self.write_config()
        s = common.load_config(p, layers=2)
        self.assertEqual((s.layers_run, s.layers_model, s.config.num_hidden_layers), (2, 4, 2))
        self.assertEqual(s.name, "tiny-qwen2")
        self.assertEqual(common.load_config(p).layers_run, 4)
        with self.assertRaisesRegex(common.PeerError, "--layers 5: must be in 1..4"):
            common.load_config(p, layers=5)
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json")
        with self.assertRaisesRegex(common.PeerError, "malformed JSON"):
            common.load_config(bad)

    def test_param_count_untied_and_tied(self):
        for tied in (False, True):
            p = self.write_config(tie_word_embeddings=tied)
            s = common.load_config(p, layers=3)
            m = common.build_model(s, dtype=torch.float32, seed=0)
            self.assertEqual(common.count_params(m), qwen2_params(TINY, 3, tied), "tied=%s" % tied)

    def test_chunked_ce_equals_full_ce(self):
        torch.manual_seed(0)
        head = torch.nn.Linear(16, 50, bias=False)
        h = torch.randn(3, 7, 16, requires_grad=True)
        t = torch.randint(0, 50, (3, 7))
        ref = torch.nn.functional.cross_entropy(head(h).reshape(-1, 50), t.reshape(-1))
        g_ref = torch.autograd.grad(ref, [h, head.weight])
        for chunk in (1, 4, 7, 21, 1000):
            got = common.chunked_ce_mean(h, head, t, chunk)
            g = torch.autograd.grad(got, [h, head.weight])
            self.assertAlmostEqual(got.item(), ref.item(), places=5)
            for a, b in zip(g, g_ref):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)

    def test_loss_model_matches_hf_loss(self):
        s = common.load_config(self.write_config(), layers=2)
        m = common.build_model(s, dtype=torch.float32, seed=0, attn="eager")
        lm = common.make_loss_model(m, ce_chunk=5)
        ids = torch.randint(0, 512, (2, 9))
        ours = lm(ids[:, :-1], ids[:, 1:])
        logits = m(input_ids=ids[:, :-1]).logits
        ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 512), ids[:, 1:].reshape(-1))
        self.assertAlmostEqual(ours.item(), ref.item(), places=5)

    def test_param_groups(self):
        m = common.build_model(common.load_config(self.write_config(), layers=1), dtype=torch.float32, seed=0)
        g = common.adamw_param_groups(m.parameters())
        self.assertEqual(g[0]["weight_decay"], common.WEIGHT_DECAY)
        self.assertEqual(g[1]["weight_decay"], 0.0)
        self.assertTrue(all(p.dim() >= 2 for p in g[0]["params"]))
        self.assertTrue(all(p.dim() < 2 for p in g[1]["params"]))
        self.assertEqual(len(g[0]["params"]) + len(g[1]["params"]), len(list(m.parameters())))
        # 1 layer: embed, head, q,k,v,o, gate,up,down = 9 matrices; 3 biases + 2 norms + final norm
        self.assertEqual((len(g[0]["params"]), len(g[1]["params"])), (9, 6))


def plain_run(cfg_path, layers, steps, warmup=0, checkpoint=True, seed=5, data="synthetic", keep_logits=False):
    """The plain-torch training path every torch peer shares: model, per-layer
    checkpointing, chunked loss, AdamW groups, train_step_torch, run_timed."""
    spec = common.load_config(cfg_path, layers)
    m = common.build_model(spec, dtype=torch.float32, seed=seed, attn="sdpa")
    n = common.count_params(m)
    if checkpoint:
        common.checkpoint_each_layer(m)
    lm = common.make_loss_model(m, ce_chunk=24, recompute_head=not keep_logits)
    groups = common.adamw_param_groups(lm.parameters())
    opt = torch.optim.AdamW(groups, lr=common.LR, betas=(common.BETA1, common.BETA2), eps=common.EPS)
    params = [p for g in groups for p in g["params"]]
    batches = common.TokenBatches(data, 2, 16, spec.config.vocab_size, seed=11)
    before = [p.detach().clone() for p in params]
    times, rows, _ = common.run_timed(lambda x, y: common.train_step_torch(lm, opt, params, x, y),
                                   batches, warmup=warmup, steps=steps, label="test")
    return spec, n, times, rows, before, params


class TestTrainingLoop(TmpDir):
    def test_two_step_cpu_smoke(self):
        cfg = self.write_config()
        spec, n, times, rows, before, params = plain_run(cfg, layers=2, steps=2, warmup=1)
        self.assertEqual(len(times), 2)
        self.assertEqual([r["warmup"] for r in rows], [True, False, False, False])
        self.assertEqual([r["last"] for r in rows], [False, False, False, True])
        self.assertEqual([t * 1000.0 for t in times], [r["step_ms"] for r in rows[1:3]])
        for r in rows:
            self.assertTrue(np.isfinite(r["loss"]) and r["grad_norm"] > 0)
        self.assertAlmostEqual(rows[0]["loss"], np.log(512), delta=0.5)  # near-uniform at init
        self.assertTrue(any(not torch.equal(a, b.detach()) for a, b in zip(before, params)))
        row = common.make_row(experiment="test", system="plain_torch", model=spec.name, params=n,
                              layers_run=spec.layers_run, layers_model=spec.layers_model, batch=2,
                              seq_len=16, precision="fp32", step_times_s=times, peak_gpu=None,
                              peak_host=common.peak_host_bytes(), env=common.collect_env())
        self.assertEqual(tuple(row), common.RESULT_KEYS)
        self.assertAlmostEqual(row["tflops"], 6 * n * 32 / (row["step_ms"]["median"] / 1000) / 1e12)

    def test_timing_rule_no_sync_inside_the_window(self):
        """The one timing rule (harness/resultslib/timing.py): every batch made before the
        first step, a synchronize at the window's edges only (two, whatever the step count),
        the per-phase synchronizes only in a phases run; warm-up and last step not timed."""
        from .. import peer_loop
        cfg = self.write_config()
        spec = common.load_config(cfg, 1)
        b = common.TokenBatches("synthetic", 2, 16, spec.config.vocab_size, seed=11)
        made, syncs, seen = [], [], []
        real_next, real_sync = b.next_window, peer_loop._sync
        b.next_window = lambda: (made.append(len(seen)), real_next())[1]
        peer_loop._sync = lambda device: syncs.append(device)
        try:
            def step(x, y):
                seen.append(x)
                return torch.tensor(1.0), None
            times, rows, window = common.run_timed(step, b, warmup=2, steps=5)
            self.assertEqual(len(syncs), 2)  # the window's edges, not two per step
            self.assertEqual(made, [0] * 8)  # all 2 + 5 + 1 batches made before the first step
            self.assertEqual((len(times), len(rows), window["steps"]), (5, 8, 8))
            ph = common.Phases()
            common.run_timed(lambda x, y: (ph.start(), ph.mark("fwd_ms"), (torch.tensor(1.0), None))[2], b,
                             warmup=2, steps=5, phases=ph)
            self.assertEqual(len(syncs), 2 + 2 + 8 * 2)  # a phases run: its timers' own synchronizes
        finally:
            peer_loop._sync = real_sync
        f = common.timing_fields(rows, window, phases=False)
        self.assertEqual((f["timing_rule"], f["timing"], len(f["step_ms_all"])), (common.TIMING_RULE, "ratio", 8))
        self.assertEqual(common.timing_fields(rows, window, phases=True)["timing"], "phases")

    def test_work_like_megatrain(self):
        """Checkpointing leaves the last layer out (megatrain keeps its activations); kept
        logits run the loss head once; the row says what still differs from megatrain's step."""
        cfg = self.write_config()
        m = common.build_model(common.load_config(cfg, 3), dtype=torch.float32, seed=0)
        self.assertEqual(common.checkpoint_each_layer(m), 2)
        wrapped = [type(x).__name__ for x in common.decoder_layers(m)]
        self.assertEqual(wrapped[2], "Qwen2DecoderLayer")
        self.assertNotEqual(wrapped[0], "Qwen2DecoderLayer")
        self.assertEqual(common.work_fields(3, 2, 1)["work_differs"], [])
        self.assertEqual(len(common.work_fields(3, 3, 2)["work_differs"]), 2)
        _, _, _, a, _, pa = plain_run(cfg, layers=2, steps=2, keep_logits=False)
        _, _, _, b, _, pb = plain_run(cfg, layers=2, steps=2, keep_logits=True)
        for x, y in zip(a, b):
            self.assertAlmostEqual(x["loss"], y["loss"], places=5)
        for x, y in zip(pa, pb):
            torch.testing.assert_close(x.detach(), y.detach(), rtol=1e-4, atol=1e-6)

    def test_checkpointing_does_not_change_numerics(self):
        cfg = self.write_config()
        _, _, _, a, _, pa = plain_run(cfg, layers=2, steps=2, checkpoint=True)
        _, _, _, b, _, pb = plain_run(cfg, layers=2, steps=2, checkpoint=False)
        for x, y in zip(a, b):
            self.assertAlmostEqual(x["loss"], y["loss"], places=5)
        for x, y in zip(pa, pb):
            torch.testing.assert_close(x.detach(), y.detach(), rtol=1e-4, atol=1e-6)

    def test_token_file_run(self):
        cfg = self.write_config()
        toks = self.write_tokens(np.random.default_rng(0).integers(0, 512, 500))
        _, _, times, rows, _, _ = plain_run(cfg, layers=1, steps=2, data=toks)
        self.assertEqual(len(rows), 3)

    def test_fsdp2_world_one_on_cpu_matches_plain(self):
        """fsdp2_offload.apply_fsdp2 on a gloo CPU mesh (no offload, fp32): same
        losses as the plain path. Run in a subprocess (its own process group)."""
        cfg = self.write_config()
        code = textwrap.dedent("""
            import json, sys, torch, torch.distributed as dist
            from baselines.peers import common, fsdp2_offload
            from torch.distributed.device_mesh import init_device_mesh
            common.setup_single_rank_env()
            dist.init_process_group("gloo")
            mesh = init_device_mesh("cpu", (1,))
            spec = common.load_config(%r, 2)
            m = common.build_model(spec, dtype=torch.float32, seed=5)
            common.checkpoint_each_layer(m)
            lm = common.make_loss_model(m, 24)
            fsdp2_offload.apply_fsdp2(lm, m, "fp32", mesh=mesh, offload=False)
            groups = common.adamw_param_groups(lm.parameters())
            opt = torch.optim.AdamW(groups, lr=common.LR, betas=(common.BETA1, common.BETA2), eps=common.EPS)
            params = [p for g in groups for p in g["params"]]
            b = common.TokenBatches("synthetic", 2, 16, spec.config.vocab_size, seed=11)
            ph = common.Phases()  # the GPU run's per-phase timing, on the CPU
            t, rows, _ = common.run_timed(lambda x, y: common.train_step_torch(lm, opt, params, x, y, phases=ph), b,
                                          warmup=0, steps=2, phases=ph)
            f = common.phase_fields(rows, {"total_s": 1.5, "model_build_s": 0.5})
            assert all(f[k] > 0 for k in ("fwd_ms", "bwd_ms", "optimizer_ms")) and f["setup_s"] == 1.5, f
            assert f["setup"] == {"model_build_s": 0.5}, f
            print(json.dumps([[r["loss"], r["grad_norm"]] for r in rows]))
            dist.destroy_process_group()
        """) % cfg
        env = {k: v for k, v in os.environ.items()
               if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE")}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        fsdp = json.loads(r.stdout.strip().splitlines()[-1])
        _, _, _, rows, _, _ = plain_run(cfg, layers=2, steps=2)
        for (fl, fg), pr in zip(fsdp, rows):
            self.assertAlmostEqual(fl, pr["loss"], places=4)
            self.assertAlmostEqual(fg, pr["grad_norm"], places=3)


class TestDeepSpeedConfig(unittest.TestCase):
    def args(self, *extra):
        from .. import deepspeed_zero3
        return deepspeed_zero3.parse_args(["--config", "x.json", "--batch", "4", "--seq-len", "128", *extra])

    def test_defaults(self):
        from .. import deepspeed_zero3 as dz
        c = dz.ds_config(self.args(), hidden_size=5120)
        z = c["zero_optimization"]
        self.assertEqual(z["stage"], 3)
        self.assertEqual(z["offload_param"], {"device": "cpu", "pin_memory": True})
        self.assertEqual(z["offload_optimizer"], {"device": "cpu", "pin_memory": True})
        self.assertTrue(z["overlap_comm"])
        self.assertEqual(set(z), {"stage", "offload_param", "offload_optimizer", "overlap_comm",
                                  "contiguous_gradients"})  # every other knob at DeepSpeed's default
        self.assertEqual(c["gradient_clipping"], 1.0)
        self.assertEqual(c["bf16"], {"enabled": True})
        self.assertEqual(c["train_micro_batch_size_per_gpu"], 4)
        self.assertEqual(dz.system_name(self.args()), "deepspeed_zero3")

    def test_knobs(self):
        from .. import deepspeed_zero3 as dz
        a = self.args("--ds-hf-auto", "--ds-max-live", "2e9", "--precision", "fp32")
        c = dz.ds_config(a, hidden_size=100)
        z = c["zero_optimization"]
        self.assertEqual(z["reduce_bucket_size"], 10000)
        self.assertEqual(z["stage3_prefetch_bucket_size"], 9000)
        self.assertEqual(z["stage3_param_persistence_threshold"], 1000)
        self.assertEqual(z["stage3_max_live_parameters"], 2000000000)
        self.assertFalse(c["bf16"]["enabled"])
        self.assertEqual(dz.system_name(a), "deepspeed_zero3")  # its knobs are in the row's `ds`
        self.assertEqual(dz.system_name(self.args("--torch-adam")), "deepspeed_zero3_torchadam")

    def test_tuned_grid_knobs(self):
        """--ds-layer-sized: the prefetch bucket holds one layer (Qwen2.5-14B: 5120 wide, 13824
        MLP, 40 heads, 8 KV heads: 262M parameters, five times DeepSpeed's 5e7 default), at
        least 3 layers live, persistence 10 h; --ds-offload-ratio: ZeRO-Offload++'s ratio."""
        from .. import deepspeed_zero3 as dz
        from types import SimpleNamespace as NS
        layer = dz.layer_params(NS(hidden_size=5120, intermediate_size=13824, num_attention_heads=40,
                                   num_key_value_heads=8, head_dim=None))
        self.assertEqual(layer, 5120 * 5120 * 2 + 2 * 5120 * 1024 + 3 * 5120 * 13824)
        z = dz.ds_config(self.args("--ds-layer-sized", "--ds-offload-ratio", "0.5", "--ds-sub-group", "1e8"),
                         5120, layer)["zero_optimization"]
        self.assertEqual(z["stage3_prefetch_bucket_size"], layer)
        self.assertEqual(z["stage3_max_live_parameters"], 1000000000)
        self.assertEqual(z["stage3_param_persistence_threshold"], 51200)
        self.assertEqual(z["offload_optimizer"], {"device": "cpu", "pin_memory": True, "ratio": 0.5})
        self.assertEqual(z["sub_group_size"], 100000000)
        big = dz.ds_config(self.args("--ds-layer-sized"), 5120, 5 * 10 ** 8)["zero_optimization"]
        self.assertEqual(big["stage3_max_live_parameters"], 15 * 10 ** 8)
        with self.assertRaises(common.PeerError):
            dz.ds_config(self.args("--ds-offload-ratio", "1.5"), 5120, layer)

    def test_cpu_adam_threads_recorded(self):
        """CPU Adam's threads (OMP_NUM_THREADS, set before torch starts) and, bound, its cores."""
        code = textwrap.dedent("""
            import json, os, sys
            from baselines.peers import deepspeed_zero3 as dz
            os.sched_setaffinity(0, {0})
            a = dz.parse_args(["--config", "x.json", "--batch", "1", "--seq-len", "8", "--ds-bind-cores"])
            print(json.dumps([dz.cpu_threads(a), os.environ["OMP_NUM_THREADS"], sorted(os.sched_getaffinity(0))]))
        """)
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout), [{"threads": 1, "bound": True, "cores": "0"}, "1", [0]])
        from .. import deepspeed_zero3 as dz
        self.assertEqual(dz._ranges([0, 1, 2, 5, 7, 8]), "0-2,5,7-8")
        with self.assertRaises(common.PeerError):
            dz.cpu_threads(self.args("--ds-threads", str(len(os.sched_getaffinity(0)) + 1)))

    def test_validated_by_deepspeed(self):
        try:
            from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
        except Exception as e:  # noqa: BLE001
            self.skipTest("deepspeed not importable: %s" % e)
        from .. import deepspeed_zero3 as dz
        for extra in ((), ("--ds-hf-auto", "--ds-sub-group", "1e9", "--ds-pageable")):
            z = DeepSpeedZeroConfig(**dz.ds_config(self.args(*extra), 64)["zero_optimization"])
            self.assertEqual(int(z.stage), 3)
            self.assertTrue(z.overlap_comm)
            self.assertEqual(str(z.offload_param.device).split(".")[-1].lower(), "cpu")

    def test_short_runs_refused(self):
        r = subprocess.run([sys.executable, "-m", "baselines.peers.deepspeed_zero3", "--config", "x.json",
                            "--batch", "1", "--seq-len", "8", "--steps", "3"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip().splitlines(),
                         ["deepspeed_zero3: --warmup must be >= 2 and --steps >= 5 (docs/DESIGN.md#metrics timing rule)"])


class TestCpuAdamFailure(unittest.TestCase):
    def test_one_clear_line_and_exit_3(self):
        """A cpu_adam op that cannot build ends the run with one line, exit 3."""
        code = textwrap.dedent("""
            import sys, types
            class B:
                def load(self, verbose=False):
                    try:
                        raise RuntimeError("Ninja is required to load C++ extensions")
                    except RuntimeError as e:
                        raise RuntimeError("wrapped") from e
            ds = types.ModuleType("deepspeed"); ops = types.ModuleType("deepspeed.ops")
            ob = types.ModuleType("deepspeed.ops.op_builder"); ob.CPUAdamBuilder = B
            sys.modules.update({"deepspeed": ds, "deepspeed.ops": ops, "deepspeed.ops.op_builder": ob})
            from baselines.peers import deepspeed_zero3
            deepspeed_zero3.load_cpu_adam_op()
        """)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
        self.assertEqual(r.returncode, 3)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("deepspeed_zero3: cannot load DeepSpeed's CPU Adam op"))
        self.assertIn("Ninja is required", lines[0])


class TestDeepSpeedCPU(TmpDir):
    """ZeRO-3 + param/optimizer offload + DeepSpeedCPUAdam end to end on DeepSpeed's
    CPU accelerator (gloo): the same setup() and make_step() the GPU run uses."""

    def test_two_steps(self):
        """The defaults (a phases run), then the C2 grid's tuned point (layer-sized buckets, no
        checkpointing, kept logits, bound threads) timed by the one rule: same losses."""
        try:
            import accelerate  # noqa: F401
            import deepspeed  # noqa: F401
        except Exception as e:  # noqa: BLE001
            self.skipTest("deepspeed/accelerate not importable: %s" % e)
        cfg = self.write_config()
        code = textwrap.dedent("""
            import json, sys
            from baselines.peers import common, deepspeed_zero3 as dz
            a = dz.parse_args(["--config", %r, "--layers", "2", "--batch", "2", "--seq-len", "16",
                               "--ce-chunk", "24"] + sys.argv[1:])
            cpu = dz.cpu_threads(a)
            dz.load_cpu_adam_op()
            common.setup_single_rank_env()
            spec = common.load_config(a.config, a.layers)
            timings, info = {}, {}
            engine, n = dz.setup(a, spec, dist_backend="gloo", timings=timings, info=info)
            b = common.TokenBatches("synthetic", 2, 16, spec.config.vocab_size, seed=11)
            ph = common.Phases() if a.phases else None  # the GPU run's per-phase timing, on DeepSpeed's CPU accelerator
            t, rows, w = common.run_timed(dz.make_step(engine, ph), b, warmup=0, steps=2, phases=ph)
            f = common.phase_fields(rows, dict(timings, total_s=2.0))
            if a.phases:
                assert all(f[k] > 0 for k in ("fwd_ms", "bwd_ms", "optimizer_ms")), f
            assert set(f["setup"]) == {"model_build_s", "engine_init_s"}, f
            f.update(common.timing_fields(rows, w, a.phases), **dz.ds_fields(a, info["cfg"], cpu, 2, info["recomputed"]))
            print(json.dumps({"n": n, "rows": rows, "fields": f}))
        """) % cfg
        env = dict(os.environ, DS_ACCELERATOR="cpu")
        out = {}
        for name, extra in (("defaults", ["--phases"]),
                            ("tuned", ["--ds-layer-sized", "--ds-bind-cores", "--no-checkpointing", "--ce-keep-logits"])):
            r = subprocess.run([sys.executable, "-c", code] + extra, capture_output=True, text=True, timeout=900, env=env,
                               cwd=ROOT)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            out[name] = json.loads(r.stdout.strip().splitlines()[-1])
            self.assertEqual(out[name]["n"], qwen2_params(TINY, 2, False))
            for row in out[name]["rows"]:
                self.assertTrue(np.isfinite(row["loss"]) and row["grad_norm"] > 0)
        d, t = out["defaults"]["fields"], out["tuned"]["fields"]
        self.assertEqual((d["timing"], t["timing"], t["timing_rule"]), ("phases", "ratio", common.TIMING_RULE))
        self.assertEqual((d["work"]["recomputed_layers"], t["work"]["recomputed_layers"]), (1, 0))
        self.assertEqual((len(d["work_differs"]), len(t["work_differs"])), (1, 1))  # tuned: recomputes none of 2
        self.assertTrue(t["ds"]["cpu_adam"]["bound"] and not t["ds"]["activation_checkpointing"])
        self.assertIn("stage3_prefetch_bucket_size", t["ds"]["zero_optimization"])
        for x, y in zip(out["defaults"]["rows"], out["tuned"]["rows"]):
            self.assertAlmostEqual(x["loss"], y["loss"], places=3)


# The official-code peer (megatrain_official.py): test_official.py.


class TestRunPeers(TmpDir):
    def test_failure_rows_and_skip(self):
        """Without a GPU each torch peer fails with its one line, which becomes an
        error row; 'official' without .official/ is skipped; $OUT gets copies."""
        if torch.cuda.is_available():
            self.skipTest("a GPU is present: this checks the no-GPU failure path")
        cfg = self.write_config()
        out = os.path.join(self.tmp, "peers.jsonl")
        outdir = os.path.join(self.tmp, "OUT")
        os.mkdir(outdir)
        # run_peers.sh runs `python3`: this interpreter's (the one with torch), wherever PATH points
        env = dict(os.environ, OUT=outdir, MT_OFFICIAL_DIR=os.path.join(self.tmp, "no_official"),
                   PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
        r = subprocess.run(["bash", os.path.join(PEERS, "run_peers.sh"), "--config", cfg, "--batches", "2",
                            "--seq-len", "16", "--layers", "2", "--peers", "fsdp2_offload official",
                            "--out", out, "--timeout", "200"],
                           capture_output=True, text=True, env=env, timeout=400)
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        with open(out) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["system"], "fsdp2_offload")
        self.assertEqual((rows[0]["batch"], rows[0]["seq_len"], rows[0]["layers_run"]), (2, 16, 2))
        self.assertIn("fsdp2_offload: no CUDA device visible", rows[0]["error"])
        self.assertIn("official skipped", r.stderr)
        self.assertEqual(sorted(os.listdir(outdir)), ["peers.jsonl", "peers.log"])


if __name__ == "__main__":
    unittest.main()
