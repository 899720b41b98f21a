"""Local transformers policy on a tiny model built in the test."""

import pytest

from tests.tiny import build_tiny_model
from trajforge.envs import env_class
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.policies import make_policy
from trajforge.tasks import synthesize
from trajforge.train.data import render_sample


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


def test_batched_episodes_record_tokens_matching_the_training_renderer(model):
    tasks = synthesize("sql", 20, seed=0).tasks[:5]
    pol = make_policy(f"hf:{model}", dtype="float32", max_new_tokens=6, batch_size=3)
    trajs = run_episodes(tasks, pol, HarnessConfig(max_turns=2, max_consecutive_errors=2))
    assert len(trajs) == 5 and {t.task_id for t in trajs} == {t.id for t in tasks}
    toolset = env_class("sql").toolset()
    for t in trajs:
        assert t.policy == f"hf:{model}" and len(t.steps) == 2
        step = t.steps[0]
        assert 1 <= len(step.completion_ids) <= 6
        # What the model was prompted with is exactly what SFT would put before its first turn,
        # and what it sampled is exactly what SFT would learn.
        sample = render_sample(t, pol.tokenizer, toolset)
        first = sample.loss_mask.index(1)
        assert sample.input_ids[:first] == step.prompt_ids
        assert sample.input_ids[first: first + len(step.completion_ids)] == step.completion_ids


def test_greedy_generation_is_batch_independent(model):
    tasks = synthesize("sql", 20, seed=0).tasks[:3]
    cfg = HarnessConfig(max_turns=1)
    alone = run_episodes(tasks[:1], make_policy(f"hf:{model}", dtype="float32", max_new_tokens=8), cfg)
    batched = run_episodes(tasks, make_policy(f"hf:{model}", dtype="float32", max_new_tokens=8), cfg)
    assert alone[0].steps[0].raw == next(t for t in batched if t.task_id == tasks[0].id).steps[0].raw


def test_shared_prefix_cache_gives_the_same_generations(model):
    from trajforge.harness.loop import Episode
    from trajforge.envs import make_env

    tasks = synthesize("sql", 30, seed=0).tasks[:4]
    plain = make_policy(f"hf:{model}", dtype="float32", max_new_tokens=12, share_prefix=False)
    shared = make_policy(f"hf:{model}", dtype="float32", max_new_tokens=12)
    reqs = []
    for t in tasks:
        env = make_env("sql")
        env.reset(t)
        reqs.append(Episode(t, 0, env, plain, HarnessConfig()).request())
    ids, mask, cache = shared._batch([shared.prompt_ids(r) for r in reqs])
    assert cache is not None and mask[:, :32].all()  # the system prompt really was shared
    a, b = plain.act(reqs), shared.act(reqs)
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    assert [g.prompt_ids for g in a] == [g.prompt_ids for g in b]



def varied(model, seed: int = 0):
    """The tiny model loaded with its matrices redrawn larger (std 0.2), so that its greedy rows
    vary with the prompt (as built, every row repeats one token)."""
    import torch

    from trajforge.policies.hf import load_model

    loaded = load_model(str(model), dtype="float32")
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in loaded[0].parameters():
            if p.dim() == 2:
                p.normal_(0, 0.2)
    return loaded


@pytest.mark.parametrize("prefix", [0, 40], ids=["own-cache", "shared-prefix-cache"])
def test_finished_rows_leave_the_batch_and_the_rest_decode_the_same(model, prefix):
    """``gen_chunk``: after each chunk the rows that reached eos are dropped from the batch and
    its KV cache, and the others go on from where they were. The tiny model's weights are
    redrawn larger so that its greedy rows vary, and one of their tokens is made the eos, so rows
    end at different lengths and the dropping really happens."""
    import random
    from collections import Counter

    from trajforge.policies.hf import HFPolicy

    loaded = varied(model)
    whole = HFPolicy(str(model), loaded=loaded, max_new_tokens=20, gen_chunk=0)
    chunked = HFPolicy(str(model), loaded=loaded, max_new_tokens=20, gen_chunk=3)
    rng = random.Random(0)
    head = [rng.randrange(3, 400) for _ in range(prefix)]
    prompts = [head + [rng.randrange(3, 400) for _ in range(rng.randrange(6, 12))] for _ in range(6)]
    greedy = [0.0] * len(prompts)
    free = whole._generate(*whole._batch(prompts), greedy)
    seen = Counter(t for row in free for t in set(row[1:]))
    stop = next(t for t, n in seen.most_common() if n < len(prompts))  # ends some rows, not all
    loaded[1].eos_token = loaded[1].convert_ids_to_tokens(stop)
    one_call = whole._generate(*whole._batch(prompts), greedy)
    calls = []
    real = loaded[0].generate
    loaded[0].generate = lambda **kw: calls.append(kw["input_ids"].shape[0]) or real(**kw)
    try:
        parts = chunked._generate(*chunked._batch(prompts), greedy)
    finally:
        loaded[0].generate = real
    assert parts == one_call
    assert len({len(row) for row in parts}) > 1 and min(map(len, parts)) < 20  # rows ended apart
    assert calls[0] == len(prompts) and min(calls) < len(prompts) and calls == sorted(calls, reverse=True)
    assert all(row[-1] == stop or len(row) == 20 for row in parts)


def test_later_turns_resume_the_episodes_kept_cache_and_decode_the_same(model):
    """``keep_turns``: turn k+1 prefills only what follows turn k's tokens (``TurnCache``). Every
    episode's turns come out token for token as with a full prefill each turn, fresh rows that
    join a wave included (batch 4 over 6 tasks)."""
    from trajforge.policies.hf import HFPolicy

    loaded = varied(model)
    tasks = synthesize("sql", 30, seed=0).tasks[:6]
    cfg = HarnessConfig(max_turns=3, max_consecutive_errors=3)
    runs = {}
    for kept in (False, True):
        pol = HFPolicy(str(model), loaded=loaded, max_new_tokens=12, batch_size=4, keep_turns=kept)
        runs[kept] = (pol, {t.task_id: t for t in run_episodes(tasks, pol, cfg)})
    pol = runs[True][0]
    assert pol.turns.reused_tokens > 300 and pol.turns.entries == {}  # reused, then dropped with the episodes
    for task_id, t in runs[False][1].items():
        again = runs[True][1][task_id]
        assert len(t.steps) == 3 and [s.completion_ids for s in t.steps] == [s.completion_ids for s in again.steps]
        assert [s.prompt_ids for s in t.steps] == [s.prompt_ids for s in again.steps]


def test_a_resumed_prefill_gives_the_full_prefills_logits(model):
    """The kept keys and values, padded into a batch of rows resuming at different lengths, give
    the next-token logits that prefilling each whole prompt gives (fp32 tolerance)."""
    import torch

    from trajforge.envs import make_env
    from trajforge.harness.loop import Episode
    from trajforge.policies.hf import HFPolicy
    from trajforge.policies.turn_cache import plain

    loaded = varied(model, seed=1)
    pol = HFPolicy(str(model), loaded=loaded, max_new_tokens=9)
    reqs = []
    for t in synthesize("sql", 30, seed=0).tasks[:3]:
        env = make_env("sql")
        env.reset(t)
        reqs.append(Episode(t, 0, env, pol, HarnessConfig()).request())
    gens = pol.act(reqs)
    follow = [[5, 6, 7], [8] * 11, [9, 10]]  # a tool result of its own length after each completion
    nexts = [g.prompt_ids + g.completion_ids + f for g, f in zip(gens, follow)]
    reuse = [pol.turns.take((r.task.id, 0), 1, p) for r, p in zip(reqs, nexts)]
    assert all(r is not None and r.common == len(g.prompt_ids) + len(g.completion_ids) - 1 for r, g in zip(reuse, gens))
    ids, mask, cache = pol.turns.batch(nexts, reuse, pol.tokenizer.pad_token_id, "cpu")
    assert plain(cache)
    width = cache.get_seq_length()
    positions = (mask.cumsum(1) - 1).clamp(min=0)[:, width:]
    with torch.no_grad():
        resumed = loaded[0](input_ids=ids[:, width:], attention_mask=mask, position_ids=positions,
                            past_key_values=cache).logits[:, -1]
        full = [loaded[0](input_ids=torch.tensor([p])).logits[0, -1] for p in nexts]
    for row, whole in zip(resumed, full):
        torch.testing.assert_close(row, whole, atol=1e-4, rtol=1e-4)


def test_a_prompt_past_the_context_ends_only_its_episode_context_exceeded(model):
    """A prompt with no room left for ``max_new_tokens`` in the model's context
    (``max_position_embeddings``) is refused before generating: once the model has taken a turn
    it is ``ContextExceeded`` and its episode ends ``context_exceeded`` (as with the OpenAI
    policy), and its batch-mates get the turn they get alone. Before, the rotary tiny model
    generated on past its context without a word."""
    from trajforge.envs import make_env
    from trajforge.harness.faults import act_each
    from trajforge.harness.loop import Episode
    from trajforge.policies.base import ContextExceeded, Generation
    from trajforge.policies.hf import HFPolicy
    from trajforge.schema import Message

    loaded = varied(model)
    cfg = HarnessConfig()
    eps = []
    for t in synthesize("sql", 20, seed=0).tasks[:3]:
        env = make_env("sql")
        env.reset(t)
        eps.append(Episode(t, 0, env, HFPolicy(str(model), loaded=loaded), cfg))
    reqs = [ep.request() for ep in eps]
    grown = eps[1].messages + [Message(role="assistant", content="Let me look."),
                               Message(role="tool", name="run_sql", content="row\n" * 100)]
    reqs[1] = reqs[1]._replace(messages=grown, turn=1)
    lengths = [len(eps[0].policy.prompt_ids(r)) for r in reqs]
    assert lengths[1] > max(lengths[0], lengths[2])
    loaded[0].config.max_position_embeddings = context = max(lengths[0], lengths[2]) + 6
    pol = HFPolicy(str(model), loaded=loaded, max_new_tokens=6, keep_turns=False)
    gens = act_each(pol, reqs)
    assert isinstance(gens[1], ContextExceeded)
    assert [type(g) for g in (gens[0], gens[2])] == [Generation, Generation]
    assert [gens[0], gens[2]] == [pol.act([reqs[0]])[0], pol.act([reqs[2]])[0]]
    eps[1].take_turn(gens[1], 0.0, cfg)
    assert eps[1].end == "context_exceeded" and not eps[1].faults
    # A first prompt that does not fit is the setup's (the task, max_new_tokens), not the model's.
    pol.max_new_tokens = context
    with pytest.raises(ValueError, match="takes at most"):
        pol.act([reqs[0]])


def test_a_checkpoints_repetition_penalty_does_not_change_greedy_turns(model):
    """A model's shipped ``generation_config`` may set a repetition penalty (Qwen2.5: 1.05);
    generate() applied it, so "greedy" turns were not the argmax that ``trajforge serve`` takes
    and training scores. The tiny model's greedy rows repeat tokens, so a penalty shows."""
    from trajforge.policies.hf import HFPolicy

    loaded = varied(model)
    pol = HFPolicy(str(model), loaded=loaded, max_new_tokens=12, keep_turns=False)
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    argmax = pol._generate(*pol._batch(prompts), [0.0, 0.0])
    loaded[0].generation_config.repetition_penalty = 1.3
    assert pol._generate(*pol._batch(prompts), [0.0, 0.0]) == argmax
