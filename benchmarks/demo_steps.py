"""The demo's first 8 SFT steps, timed, on whatever trajforge is first on ``sys.path``.

Compares two commits on one machine: check the other one out in a clone and run both, in turns
(these machines are noisy, so alternate them: old, new, new, old):

    PYTHONPATH=/tmp/old .venv/bin/python benchmarks/demo_steps.py     # git clone . /tmp/old && git -C /tmp/old checkout REV
    TRAJFORGE_MMAP_THRESHOLD=0 .venv/bin/python benchmarks/demo_steps.py  # this tree, glibc's allocator as in the demo

Prints the settings it ran with and {steps, tokens, seconds, tok_s}; seconds include the model load.
Settings a commit's SFTConfig lacks are left out (older configs had no accumulation or checkpointing).
"""
import sys, time, tempfile, json
from trajforge.tasks import synthesize
from trajforge.harness import run_episodes
from trajforge.grade import graded
from trajforge.policies import make_policy
from trajforge.train.sft import SFTConfig, train_sft
import trajforge
tasks = [t for t in synthesize("sql", 260, 0).tasks if t.split == "train"]
trajs = [graded(t) for t in run_episodes(tasks, make_policy("expert"))]
# 1.75 epochs: the schedule its recorded A/B figures used (the demo now runs 2.0; a step costs the same).
want = dict(epochs=1.75, lr=1e-3, batch_size=4, grad_accum=1, dropout=0.0, seed=0, replay_share=0.0,
            gradient_checkpointing=False, max_steps=8)
cfg = SFTConfig(**{k: v for k, v in want.items() if k in SFTConfig.model_fields})
print(trajforge.__file__, {k: getattr(cfg, k, None) for k in want}, flush=True)
t0 = time.perf_counter()
res = train_sft(trajs, "smollm2-135m", tempfile.mkdtemp(), cfg, progress=False)
dt = time.perf_counter() - t0
print(json.dumps({"steps": res.steps, "tokens": res.tokens, "seconds": round(dt, 1), "tok_s": round(res.tokens / dt, 1)}))
