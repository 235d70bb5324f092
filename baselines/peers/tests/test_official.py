"""CPU tests of the official-code peer (megatrain_official.py and its helpers).

What they cannot cover here: CPUMasterModel's engine itself (CUDA-only: torch.cuda streams,
events and pinned buffers) and DeepSpeed's cpu_adam build; those run only on the GPU machine
(OFFICIAL_RUN.md). Everything of train.py's path before and around it (its config loader,
tokenizer, dataset, collator and DataLoader, its layer loop with the 2-D mask, its loss) runs
on the CPU in TestCpuRehearsal, where torch, .official and datasets' needs are importable. The log it prints
there is rebuilt below from its own format strings (examples/sft/train.py at 919520f,
the logger.info calls in its training loop, and logging.basicConfig's format).

    python3 -m unittest discover -s baselines/peers/tests -t . -p 'test_official*.py' -v
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from .. import official_files as of
from .. import official_parse as op
from ..common import PeerError

PEERS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(PEERS))

MIRROR = os.environ.get("MT_OFFICIAL_MIRROR", "/work/.mirror/DLYuanGod+MegaTrain/repo")
COMMIT = "919520f07182c0d4d3e9765b2f915702e71c11a4"


def have(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def official_log(steps, *, B, T, warm_extra=0.0, optimizer="Using DeepSpeed CPUAdam optimizer (SIMD-accelerated)"):
    """A log as train.py prints it: the same f-strings, through '%(asctime)s [%(levelname)s] %(message)s'."""
    L = lambda msg: "02:31:00 [INFO] %s" % msg  # noqa: E731
    out = [L("Loading model with attn_implementation='sdpa'..."),
           L("Model loaded. Attention implementation: sdpa"), L(optimizer),
           "02:31:05 [WARNING] some warning", L("=" * 70), L("Starting training..."), L("=" * 70)]
    total = 0.0
    for i, (step_time, fwd, bwd) in enumerate(steps):
        loss = 12.0 - 0.1 * i
        total += loss
        tps = B * T / step_time
        tflops = 6 * 1000 * B * T / 1e12 / step_time
        out += [L(f"Step {i+1}/{len(steps)} | Loss {loss:.4f} | Avg {total/(i+1):.4f}"),
                L(f"  Time: {step_time:.2f}s | Tokens/s {tps:.1f} | TFLOPS {tflops:.1f}"),
                L(f"  FWD: {fwd:.2f}s | BWD: {bwd:.2f}s"),
                L(f"  GPU: {10.0 + i:.2f}GB peak (alloc 1.00GB / reserved 2.00GB)"),
                L(f"  CPU: {30.5:.2f}GB")]
    out += [L("TRAINING COMPLETE"), L(f"Peak GPU: {20.0:.2f} GB"), L(f"Peak CPU: {99.0:.2f} GB"),
            L(f"  Avg Latency: {1.0:.3f}s per step")]
    return "\n".join(out) + "\n"


class TestYaml(unittest.TestCase):
    def test_floats_load_as_floats(self):
        import yaml
        for x in (3e-4, 1e-8, 0.1, 0.95, 1.0, 2.5e-10, 1e20):
            s = of.yaml_float(x)
            self.assertEqual(yaml.safe_load("v: %s" % s)["v"], x, s)
            self.assertIsInstance(yaml.safe_load("v: %s" % s)["v"], float)

    def test_train_yaml_is_our_configuration(self):
        """Every key the official yaml_to_training_config reads for a step, with our values."""
        import yaml
        y = yaml.safe_load(of.train_yaml(
            model_dir="/w/models/a b", data_dir="/w/data/x", batch=16, seq_len=1024, steps=9, seed=1234,
            lr=3e-4, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8, clip=1.0,
            checkpoint_interval=4, optimizer="deepspeed_adam"))
        self.assertEqual(y["model"], {"name": "/w/models/a b", "dtype": "bfloat16", "device": 0,
                                      "attn_implementation": "sdpa", "trust_remote_code": False})
        self.assertEqual(y["dataset"], {"name": of.DATASET_NAME, "dataset_dir": "/w/data/x", "max_seq_len": 1024,
                                        "num_workers": 1, "train_on_prompt": True})
        self.assertEqual(y["training"], {"batch_size": 16, "gradient_accumulation_steps": 1, "num_steps": 9,
                                         "learning_rate": 3e-4, "weight_decay": 0.1, "max_grad_norm": 1.0,
                                         "seed": 1234})
        self.assertEqual(y["optimizer"], {"type": "deepspeed_adam", "beta1": 0.9, "beta2": 0.95, "eps": 1e-8})
        self.assertEqual(y["memory"], {"checkpoint_interval": 4, "num_grad_slabs": 12})
        self.assertEqual(y["logging"], {"log_interval": 1, "enable_timing": True})

    def test_slabs_follow_interval_and_optimizer_checked(self):
        import yaml
        kw = dict(model_dir="m", data_dir="d", batch=1, seq_len=8, steps=1, seed=0, lr=1e-3, weight_decay=0.0,
                  beta1=0.9, beta2=0.95, eps=1e-8, clip=1.0)
        y = yaml.safe_load(of.train_yaml(checkpoint_interval=8, optimizer="adamw", **kw))
        self.assertEqual((y["memory"]["num_grad_slabs"], y["optimizer"]["type"]), (16, "adamw"))
        with self.assertRaises(ValueError):
            of.train_yaml(checkpoint_interval=1, optimizer="sgd", **kw)


class TestDataAndTokenizer(unittest.TestCase):
    def test_dataset_files(self):
        files = of.dataset_files([[5, 9, 2], [0, 151935, 7]])
        info = json.loads(files["dataset_info.json"])[of.DATASET_NAME]
        self.assertEqual((info["file_name"], info["formatting"]), (of.DATA_FILE, "alpaca"))
        samples = json.loads(files[of.DATA_FILE])
        self.assertEqual(samples, [{"instruction": "t5 t9 t2", "input": "", "output": ""},
                                   {"instruction": "t0 t151935 t7", "input": "", "output": ""}])

    def test_tokenizer_vocab(self):
        tok = json.loads(of.tokenizer_files(1000)["tokenizer.json"])
        self.assertEqual(len(tok["model"]["vocab"]), 1000)
        self.assertEqual(tok["model"]["vocab"]["t999"], 999)

    @unittest.skipUnless(have("transformers") and have("jinja2"), "transformers not importable here")
    def test_ids_round_trip_as_the_official_dataset_reads_them(self):
        """ChatDataset.__getitem__'s calls (infinity/data/datasets.py at 919520f): alpaca ->
        messages, apply_chat_template(tokenize=False), then the tokenizer with truncation and
        max_length padding. Our row must come back as exactly its ids, unpadded."""
        from transformers import AutoTokenizer
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        of.write_files(d, of.tokenizer_files(1000))
        tok = AutoTokenizer.from_pretrained(d)
        row = [5, 9, 2, 999, 0, 17, 17, 3]
        s = json.loads(of.dataset_files([row])[of.DATA_FILE])[0]
        msgs = [{"role": "user", "content": s["instruction"]}, {"role": "assistant", "content": s["output"]}]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
        enc = tok(text, max_length=len(row), truncation=True, padding="max_length", add_special_tokens=False)
        self.assertEqual(list(enc["input_ids"]), row)
        self.assertEqual(list(enc["attention_mask"]), [1] * len(row))


@unittest.skipUnless(have("datasets") and os.path.isfile(os.path.join(ROOT, ".official", "src", "infinity",
                                                                      "data", "datasets.py")),
                     "datasets or .official/ (official_prepare.sh) absent here")
class TestOfficialLoader(unittest.TestCase):
    """Our dataset files through the official code's own registry loader and alpaca
    conversion (.official/src/infinity/data/datasets.py), in a child process; without torch
    here, a stub torch module stands in for the one import that module makes at load
    (torch.utils.data.Dataset as a base class), dropped from sys.modules before datasets
    runs (it inspects any imported torch)."""

    def test_load_dataset_by_name(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        rows = [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
        of.write_files(os.path.join(tmp, "data"), of.dataset_files(rows))
        stub = os.path.join(tmp, "stub")
        if not have("torch"):
            os.makedirs(os.path.join(stub, "torch", "utils"))
            for f, text in (("torch/__init__.py", "from . import utils\n"), ("torch/utils/__init__.py", "from . import data\n"),
                            ("torch/utils/data.py", "class Dataset:\n    pass\n")):
                with open(os.path.join(stub, f), "w") as fh:
                    fh.write(text)
        code = ("import importlib.util, json, sys\n"
                "spec = importlib.util.spec_from_file_location('offds', sys.argv[1])\n"
                "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
                "if sys.argv[4] == 'stub':\n"
                "    [sys.modules.pop(k) for k in list(sys.modules) if k == 'torch' or k.startswith('torch.')]\n"
                "ds, attr = m.load_dataset_by_name(sys.argv[2], sys.argv[3])\n"
                "msgs = [m.convert_alpaca(ds[i], attr.get('columns', {}))[0] for i in range(len(ds))]\n"
                "print(json.dumps(msgs))\n")
        env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf"),
                   PYTHONPATH=os.pathsep.join([stub] + sys.path))
        r = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, ".official", "src", "infinity", "data",
                            "datasets.py"), of.DATASET_NAME, os.path.join(tmp, "data"),
                            "real" if have("torch") else "stub"],
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        msgs = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(msgs, [[{"role": "user", "content": of.sample_text(row)},
                                 {"role": "assistant", "content": ""}] for row in rows])


@unittest.skipUnless(have("yaml") and os.path.isfile(os.path.join(ROOT, ".official", "src", "infinity", "config",
                                                                  "yaml_loader.py")),
                     "pyyaml or .official/ (official_prepare.sh) absent here")
class TestOfficialConfig(unittest.TestCase):
    """Our YAML through the official loader itself (infinity/config: load_training_config,
    get_optimizer_type, get_num_workers and CPUMasterConfig's own checks), in a child; a
    stub torch (dtype objects only) stands in where torch is absent."""

    def test_official_loader_reads_our_yaml(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        y = os.path.join(tmp, "train.yaml")
        with open(y, "w") as f:
            f.write(of.train_yaml(model_dir="/w/m", data_dir="/w/d", batch=16, seq_len=1024, steps=7, seed=1234,
                                  lr=3e-4, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8, clip=1.0,
                                  checkpoint_interval=4, optimizer="deepspeed_adam"))
        stub = os.path.join(tmp, "stub")
        if not have("torch"):
            os.makedirs(os.path.join(stub, "torch"))
            with open(os.path.join(stub, "torch", "__init__.py"), "w") as f:
                f.write("class dtype:\n    def __init__(self, n):\n        self.n = n\n"
                        "    def __repr__(self):\n        return 'torch.' + self.n\n"
                        "bfloat16, float16, float32 = dtype('bfloat16'), dtype('float16'), dtype('float32')\n")
        code = ("import importlib.util, json, sys, types, warnings\n"
                "src = sys.argv[1]\n"
                "pkg = types.ModuleType('infinity'); pkg.__path__ = [src + '/infinity']; sys.modules['infinity'] = pkg\n"
                "from infinity.config.yaml_loader import load_yaml_config, load_training_config, "
                "get_optimizer_type, get_num_workers\n"
                "with warnings.catch_warnings():\n"
                "    warnings.simplefilter('error')\n"
                "    c = load_training_config(sys.argv[2])\n"
                "y = load_yaml_config(sys.argv[2])\n"
                "keys = ('model_name', 'attn_implementation', 'trust_remote_code', 'dataset_name', 'dataset_dir', "
                "'max_seq_len', 'train_on_prompt', 'batch_size', 'gradient_accumulation_steps', 'num_steps', "
                "'learning_rate', 'weight_decay', 'max_grad_norm', 'seed', 'beta1', 'beta2', 'eps', "
                "'checkpoint_interval', 'num_grad_slabs', 'log_interval', 'world_size', 'devices')\n"
                "out = {k: getattr(c, k) for k in keys}\n"
                "out.update(dtype=repr(c.dtype), optimizer=get_optimizer_type(y), workers=get_num_workers(y))\n"
                "print(json.dumps(out))\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([stub] + sys.path))
        r = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, ".official", "src"), y],
                           capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        got = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(got, {
            "model_name": "/w/m", "attn_implementation": "sdpa", "trust_remote_code": False,
            "dataset_name": of.DATASET_NAME, "dataset_dir": "/w/d", "max_seq_len": 1024, "train_on_prompt": True,
            "batch_size": 16, "gradient_accumulation_steps": 1, "num_steps": 7, "learning_rate": 3e-4,
            "weight_decay": 0.1, "max_grad_norm": 1.0, "seed": 1234, "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
            "checkpoint_interval": 4, "num_grad_slabs": 12, "log_interval": 1, "world_size": 1, "devices": [0],
            "dtype": "torch.bfloat16", "optimizer": "deepspeed_adam", "workers": 1})


@unittest.skipUnless(have("transformers") and have("jinja2"), "transformers not importable here")
class TestModelDir(unittest.TestCase):
    def test_train_py_reads_config_and_tokenizer(self):
        """What train.py loads from the model dir before the weights (AutoTokenizer, then
        AutoConfig and its VLM test), from the config our --write-model child saves
        (common.load_config's, cut to --layers) and our tokenizer files."""
        from .. import common
        from transformers import AutoConfig, AutoTokenizer
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        spec = common.load_config(os.path.join(ROOT, "experiments", "models", "qwen2.5-14b.json"), 2)
        spec.config.save_pretrained(d)
        of.write_files(d, of.tokenizer_files(spec.config.vocab_size))
        tok = AutoTokenizer.from_pretrained(d, trust_remote_code=False)
        cfg = AutoConfig.from_pretrained(d, trust_remote_code=False)
        self.assertEqual((cfg.model_type, cfg.num_hidden_layers, cfg.vocab_size), ("qwen2", 2, 152064))
        self.assertFalse(hasattr(cfg, "vision_config"))
        self.assertEqual(len(tok), cfg.vocab_size)
        self.assertEqual(tok.pad_token, "t0")

    def test_word_tokenizer_in_a_qwen2_dir_gives_our_ids(self):
        """The model dir says qwen2, so AutoTokenizer may build Qwen2Tokenizer, which ignores
        our word-level tokenizer.json (on the H200, 2026-11-26: every row came out as padding).
        official_launch's install_word_tokenizer makes train.py's AutoTokenizer load it as
        what it is: a 1024-word row is exactly its 1024 ids, nothing padded."""
        import random
        from .. import common
        from .. import official_launch
        from transformers import AutoTokenizer
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        spec = common.load_config(os.path.join(ROOT, "experiments", "models", "qwen2.5-14b.json"), 2)
        spec.config.save_pretrained(d)
        of.write_files(d, of.tokenizer_files(spec.config.vocab_size))
        self.assertTrue(official_launch.is_word_tokenizer(d))
        self.assertFalse(official_launch.is_word_tokenizer(tempfile.gettempdir()))
        original = AutoTokenizer.from_pretrained
        self.addCleanup(setattr, AutoTokenizer, "from_pretrained", original)
        official_launch.install_word_tokenizer()
        tok = AutoTokenizer.from_pretrained(d, trust_remote_code=False)
        rng = random.Random(7)
        row = [rng.randrange(spec.config.vocab_size) for _ in range(1024)]
        row[3] = 0  # "t0" is also the pad token: still a real token
        msgs = [{"role": "user", "content": of.sample_text(row)}, {"role": "assistant", "content": ""}]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False)
        enc = tok(text, max_length=1024, truncation=True, padding="max_length", add_special_tokens=False)
        self.assertEqual(enc["input_ids"], row)
        self.assertEqual(sum(enc["attention_mask"]), 1024)


class TestParse(unittest.TestCase):
    B, T = 4, 1024

    def test_steps_phases_and_warmup(self):
        steps = [(9.87, 3.0, 5.0), (4.31, 1.2, 2.4)] + [(2.0 + 0.01 * i, 0.5, 1.0) for i in range(5)]
        got = op.parse_log(official_log(steps, B=self.B, T=self.T))
        self.assertEqual((got["optimizer"], got["attn"], got["started"]), ("deepspeed_cpu_adam", "sdpa", True))
        self.assertEqual(len(got["steps"]), 7)
        s = op.timed_summary(got, batch=self.B, seq_len=self.T, warmup=2)
        self.assertEqual(len(s["step_s"]), 5)
        for t, (want, _, _) in zip(s["step_s"], steps[2:]):
            self.assertAlmostEqual(t, want, delta=1e-4)  # from Tokens/s, finer than Time's 2 decimals
        ph = s["extra"]["phases_ms"]
        self.assertAlmostEqual(ph["forward"], 500.0)
        self.assertAlmostEqual(ph["backward"], 1000.0)
        self.assertAlmostEqual(ph["optimizer_and_rest"], 520.0, delta=0.1)
        self.assertEqual(s["peak_gpu_bytes"], int(16.0 * 2**30))  # the per-step "GPU: x GB peak", not the summary
        self.assertEqual(s["peak_host_bytes"], int(30.5 * 2**30))
        self.assertEqual((s["extra"]["loss_first"], s["extra"]["steps_logged"]), (12.0, 7))

    def test_torch_adamw_detected(self):
        got = op.parse_log(official_log([(1.0, 0.2, 0.3)] * 3, B=1, T=8, optimizer="Using PyTorch AdamW optimizer"))
        self.assertEqual(got["optimizer"], "torch_adamw")

    def test_refusals(self):
        got = op.parse_log(official_log([(1.0, 0.2, 0.3)] * 3, B=self.B, T=self.T))
        with self.assertRaisesRegex(PeerError, "disagree"):  # the row's B*T is not the run's
            op.timed_summary(got, batch=self.B * 2, seq_len=self.T, warmup=2)
        with self.assertRaisesRegex(PeerError, "none left"):
            op.timed_summary(got, batch=self.B, seq_len=self.T, warmup=3)
        with self.assertRaisesRegex(PeerError, "no 'Step"):
            op.timed_summary(op.parse_log("Traceback ...\n"), batch=1, seq_len=1, warmup=0)
        nan = official_log([(1.0, 0.2, 0.3)] * 3, B=1, T=8).replace("Loss 11.9000", "Loss nan")
        with self.assertRaisesRegex(PeerError, "NaN at step 2"):
            op.timed_summary(op.parse_log(nan), batch=1, seq_len=8, warmup=0)


class TestSkip(unittest.TestCase):
    def test_skip_without_official_tree(self):
        r = subprocess.run([sys.executable, "-m", "baselines.peers.megatrain_official", "--config",
                            os.path.join(ROOT, "experiments", "models", "qwen2.5-14b.json"), "--batch", "2",
                            "--seq-len", "16", "--official", "/nonexistent/.official"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
        self.assertEqual(r.returncode, 77, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertIn("megatrain_official: skipped: /nonexistent/.official absent: run "
                      "baselines/peers/official_prepare.sh", r.stderr)


class TestRunTrain(unittest.TestCase):
    """The plumbing around train.py (megatrain_official.run_train, child_env) on a fake
    official tree whose examples/sft/train.py prints the real format."""

    def fake_tree(self, body):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        os.makedirs(os.path.join(tmp, "src", "examples", "sft"))
        with open(os.path.join(tmp, "src", "examples", "sft", "train.py"), "w") as f:
            f.write(body)
        return tmp

    def test_log_streamed_parsed_and_kept(self):
        from .. import megatrain_official as mo
        text = official_log([(1.0, 0.2, 0.3)] * 4, B=2, T=16)
        tree = self.fake_tree("import sys, time\nsys.stderr.write(%r)\n" % text)
        logf = os.path.join(tree, "train.log")
        env = mo.child_env(tree, tree, "/site")
        self.assertEqual(env["PYTHONPATH"].split(os.pathsep)[:2], [os.path.join(tree, "src"), "/site"])
        self.assertEqual((env["HF_HUB_OFFLINE"], env["HF_DATASETS_OFFLINE"]), ("1", "1"))
        rc, got, started, wall = mo.run_train(tree, "x.yaml", env, 60, logf)
        self.assertEqual(rc, 0)
        self.assertEqual(got, text)
        self.assertIsNotNone(started)
        with open(logf) as f:
            self.assertEqual(f.read(), text)
        s = op.timed_summary(op.parse_log(got), batch=2, seq_len=16, warmup=2)
        self.assertEqual(len(s["step_s"]), 2)

    def test_timeout_kills_the_group(self):
        from .. import megatrain_official as mo
        tree = self.fake_tree("import subprocess, sys, time\n"
                              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
                              "print('Starting training...', flush=True)\ntime.sleep(60)\n")
        t0 = __import__("time").perf_counter()
        rc, got, started, wall = mo.run_train(tree, "x.yaml", dict(os.environ), 2, os.path.join(tree, "l"))
        self.assertEqual(rc, 124)
        self.assertLess(__import__("time").perf_counter() - t0, 30)  # the grandchild did not hold stdout open
        self.assertIn("Starting training...", got)


class TestLaunchShim(unittest.TestCase):
    """official_launch.py's SDPA wrapper, against a stand-in transformers registry and
    mask objects (no torch here): a 2-D all-ones mask is dropped (SDPA then runs causal),
    checked once per mask; a padded 2-D mask is an error; a 4-D mask passes unchanged."""

    class Mask:
        def __init__(self, ndim, ones, ptr):
            self.ndim, self.ones, self.ptr, self.shape, self.checks = ndim, ones, ptr, (2, 8), 0

        def dim(self):
            return self.ndim

        def data_ptr(self):
            return self.ptr

        def bool(self):
            return self

        def all(self):
            self.checks += 1
            return self.ones

    def test_wrapper(self):
        import types
        from .. import official_launch
        calls = []
        registry = {"sdpa": lambda module, q, k, v, mask, *a, **kw: calls.append((mask, kw)) or "out"}
        fake = types.ModuleType("transformers.modeling_utils")
        fake.ALL_ATTENTION_FUNCTIONS = registry
        saved = {k: sys.modules.get(k) for k in ("transformers", "transformers.modeling_utils")}
        sys.modules["transformers"] = types.ModuleType("transformers")
        sys.modules["transformers.modeling_utils"] = fake
        try:
            official_launch.install_sdpa_2d_mask()
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        f = registry["sdpa"]
        ones = self.Mask(2, True, 1)
        for _ in range(3):  # every layer of a step sees the same mask
            self.assertEqual(f("m", "q", "k", "v", ones, scaling=0.1), "out")
        self.assertEqual(ones.checks, 1)
        self.assertEqual(calls[-1], (None, {"scaling": 0.1}))
        four = self.Mask(4, False, 2)
        f("m", "q", "k", "v", four)
        self.assertIs(calls[-1][0], four)
        with self.assertRaisesRegex(RuntimeError, "padded batch"):
            f("m", "q", "k", "v", self.Mask(2, False, 3))


@unittest.skipUnless(os.path.isdir(MIRROR) and shutil.which("git"), "no mirror of DLYuanGod/MegaTrain here")
class TestPrepare(unittest.TestCase):
    def run_prepare(self, dest, **env):
        e = dict(os.environ, MT_OFFICIAL_DEST=dest, MT_OFFICIAL_WHEELS="",
                 MT_OFFICIAL_URL="file:///nonexistent/MegaTrain", **env)  # no network in a test: the mirror
        return subprocess.run(["bash", os.path.join(PEERS, "official_prepare.sh")], capture_output=True,
                              text=True, env=e, timeout=300)

    def test_lays_the_commit_small_and_idempotent(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        dest = os.path.join(tmp, ".official")
        r = self.run_prepare(dest)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(dest, "COMMIT")) as f:
            self.assertEqual(f.read().strip(), COMMIT)
        src = os.path.join(dest, "src")
        for p in ("examples/sft/train.py", "infinity/model/cpu_master.py", "infinity/data/datasets.py",
                  "infinity/config/yaml_loader.py", "LICENSE"):
            self.assertTrue(os.path.isfile(os.path.join(src, p)), p)
        size, names = 0, []
        for d, dirs, files in os.walk(dest):
            names += dirs + files
            size += sum(os.path.getsize(os.path.join(d, f)) for f in files)
        self.assertLess(size, 2 << 20)
        for bad in ("build", "__pycache__", "cuda_pipeline"):
            self.assertNotIn(bad, names)
        self.assertFalse([n for n in names if n.endswith((".so", ".o", ".pyc"))])
        r = self.run_prepare(dest)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already at %s" % COMMIT, r.stderr)

    def test_refuses_without_the_commit(self):
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        r = self.run_prepare(os.path.join(tmp, ".official"), MT_OFFICIAL_MIRROR=os.path.join(tmp, "none"))
        self.assertEqual(r.returncode, 1)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], r"^official_prepare: commit %s of DLYuanGod/MegaTrain is neither" % COMMIT)
        self.assertFalse(os.path.exists(os.path.join(tmp, ".official")))


# A Qwen2-shaped model (the C2 runs' architecture: its config.json is what made AutoTokenizer build
# Qwen2Tokenizer on the H200) at a size the CPU runs in seconds.
TINY_QWEN2 = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 512, "hidden_size": 64,
              "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


@unittest.skipUnless(have("torch") and have("transformers") and
                     os.path.isfile(os.path.join(ROOT, ".official", "src", "examples", "sft", "train.py")),
                     "torch, transformers or .official (official_prepare.sh) not here")
class TestCpuRehearsal(unittest.TestCase):
    """megatrain_official.py --cpu-rehearsal: the official config loader, tokenizer, ChatDataset,
    collate_fn, DataLoader and its layer loop with the 2-D mask, through official_launch.py, on the
    CPU (skipped, saying why, where datasets' own needs such as pyarrow are not importable)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.cfg = os.path.join(cls.tmp, "tiny_qwen2.json")
        with open(cls.cfg, "w") as f:
            json.dump(TINY_QWEN2, f)
        cls.work = os.path.join(cls.tmp, "work")
        cls.r = subprocess.run([sys.executable, "-m", "baselines.peers.megatrain_official", "--cpu-rehearsal",
                                "--config", cls.cfg, "--batch", "3", "--seq-len", "16", "--work", cls.work],
                               capture_output=True, text=True, timeout=900, cwd=ROOT)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        if self.r.returncode == 77:
            self.skipTest(self.r.stderr.strip().splitlines()[-1])

    def test_official_data_path_and_step(self):
        self.assertEqual(self.r.returncode, 0, self.r.stderr[-2000:])
        out = json.loads(self.r.stdout.strip().splitlines()[-1])
        self.assertEqual(out["checks"], {"ids": True, "mask": True, "causal": True, "loss": True, "grads": True})
        self.assertEqual((out["rehearsal"], out["batch"], out["layers"]), ("megatrain_official", [3, 16], 2))
        self.assertEqual(out["attention_impl"], "sdpa")
        self.assertIn(out["attention_impl_gpu"], ("sdpa", "flash_attention_2"))
        self.assertIn("attention_mask: 2-D", out["layer_kwargs"])  # the mask as the official loop hands it
        self.assertNotIn("schema", out)  # never taken for a results row

    def test_catches_the_tokenizer_bug(self):
        """Without the launcher's word-tokenizer loader (the bug the H200 run died of), the same
        rehearsal stops where that run stopped: a padded batch at the first layer."""
        self.assertEqual(self.r.returncode, 0, self.r.stderr[-2000:])
        from .. import megatrain_official as mo
        run = [d for d in os.listdir(os.path.join(self.work, "rehearsals"))][0]
        run = os.path.join(self.work, "rehearsals", run)
        env = mo.child_env(os.path.join(ROOT, ".official"), self.work, os.path.join(self.work, "site"))
        env.update(MT_OFFICIAL_SDPA_2D="1", MT_OFFICIAL_WORD_TOKENIZER="0")
        r = subprocess.run([sys.executable, os.path.join(PEERS, "official_launch.py"),
                            os.path.join(PEERS, "official_rehearse.py"), "--config", os.path.join(run, "train.yaml"),
                            "--expect", os.path.join(run, "expect.json")],
                           cwd=os.path.join(ROOT, ".official", "src"), env=env, capture_output=True, text=True,
                           timeout=600)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("a padded batch reached SDPA with a 2-D mask (3, 16)", r.stderr)


if __name__ == "__main__":
    unittest.main()
