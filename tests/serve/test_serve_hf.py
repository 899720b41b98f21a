"""``trajforge serve`` on a real (tiny) model with two LoRA adapters, over loopback HTTP.

Each answer must come from the adapter the request named: the log-probs the server returns are
checked against a fresh forward pass of the base model with only that adapter loaded.
"""

import openai
import pytest

from trajforge.harness import HarnessConfig, run_episodes
from trajforge.parse import get_dialect
from trajforge.policies.hf import HFPolicy
from trajforge.policies.openai import OpenAIPolicy
from trajforge.serve import start_server
from trajforge.tasks import synthesize


@pytest.fixture(scope="module")
def server(tiny):
    base, adapters = tiny
    srv = start_server(str(base), adapters, dtype="float32")
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def scorer(tiny):
    """score(adapter, prompt_ids, completion_ids) → log-probs of the completion under base+adapter,
    from one full forward pass (no KV cache), computed apart from the server."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base, adapters = tiny
    nets = {None: AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).eval()}
    for name, path in adapters.items():
        net = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        nets[name] = PeftModel.from_pretrained(net, path).eval()

    def score(adapter, prompt, completion):
        with torch.no_grad():
            logits = nets[adapter](input_ids=torch.tensor([prompt + completion])).logits[0].float()
        logp = torch.log_softmax(logits[len(prompt) - 1: -1], -1)
        return logp[torch.arange(len(completion)), torch.tensor(completion)].tolist()

    return score


def client(server):
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)


def greedy(server, model, **kw):
    kw = {"temperature": 0, **kw}
    return client(server).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "How many orders were placed in Berlin?"}],
        max_tokens=10, logprobs=True, extra_body={"return_token_ids": True}, **kw)


def test_each_adapter_answers_its_own_requests(server, tiny, scorer):
    base = str(tiny[0])
    answers = {m: greedy(server, m) for m in (base, "alpha", "beta", "alpha")}
    # Three models, three different greedy answers (compared as tokens: random weights emit bytes
    # that do not all decode to text), each the same when asked again at T=0.
    sampled = {m: tuple(r.choices[0].model_extra["token_ids"]) for m, r in answers.items()}
    assert len(set(sampled.values())) == 3, sampled
    assert tuple(greedy(server, "beta").choices[0].model_extra["token_ids"]) == sampled["beta"]
    for model, resp in answers.items():
        choice = resp.choices[0]
        ids, prompt = choice.model_extra["token_ids"], resp.model_extra["prompt_token_ids"]
        served = [e.logprob for e in choice.logprobs.content]
        adapter = None if model == base else model
        assert served == pytest.approx(scorer(adapter, prompt, ids), abs=1e-4)
        other = {None: "alpha", "alpha": "beta", "beta": None}[adapter]
        assert served != pytest.approx(scorer(other, prompt, ids), abs=1e-3)


def test_streaming_matches_the_whole_answer(server):
    whole = greedy(server, "alpha")
    chunks = list(greedy(server, "alpha", stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    ids = [i for c in chunks if c.choices for i in (c.choices[0].model_extra.get("token_ids") or [])]
    assert ids == whole.choices[0].model_extra["token_ids"]


def test_sampling_with_a_seed_is_reproducible(server):
    def sample(seed):
        return greedy(server, "beta", temperature=1.0, top_p=0.9, seed=seed).choices[0].model_extra["token_ids"]

    assert sample(7) == sample(7)
    assert len({tuple(sample(s)) for s in range(4)}) > 1


@pytest.mark.parametrize("native", [True, False])
def test_openai_policy_records_the_tokens_the_server_sampled(server, tiny, scorer, native):
    tasks = synthesize("sql", 20, seed=0).tasks[:2]
    pol = OpenAIPolicy(server.url, "alpha", token_ids=True, native_tools=native, max_tokens=12)
    trajs = run_episodes(tasks, pol, HarnessConfig(max_turns=2, max_consecutive_errors=2))
    assert len(trajs) == 2
    local = HFPolicy(str(tiny[0]), dialect=get_dialect("hermes"), dtype="float32") if not native else None
    for traj in trajs:
        for step in traj.steps:
            assert step.prompt_ids and step.completion_ids
            assert len(step.completion_logprobs) == len(step.completion_ids) <= 12
            assert step.completion_logprobs == pytest.approx(
                scorer("alpha", step.prompt_ids, step.completion_ids), abs=1e-4)
        if local is not None:
            # Dialect-rendered requests: the server tokenized exactly what the local policy (and
            # SFT) would put before the first turn.
            from trajforge.envs import make_env
            from trajforge.harness.loop import Episode

            env = make_env("sql")
            env.reset(next(t for t in tasks if t.id == traj.task_id))
            req = Episode(next(t for t in tasks if t.id == traj.task_id), 0, env, local, HarnessConfig()).request()
            assert traj.steps[0].prompt_ids == local.prompt_ids(req)


def test_a_client_hanging_up_mid_stream_does_not_wedge_the_server(server):
    import httpx

    body = {"model": "alpha", "messages": [{"role": "user", "content": "Tell me everything."}],
            "stream": True, "max_tokens": 2000, "temperature": 1.0, "seed": 1}
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", server.url + "/chat/completions", json=body) as r:
            lines = r.iter_lines()
            assert next(lines).startswith("data: ")
        # The connection is gone mid-generation; the generation lock must come free.
    assert greedy(server, "beta").choices[0].finish_reason in ("length", "stop")


def test_a_temperature_too_small_for_float32_samples_the_best_token(server):
    """Every temperature in OpenAI's range is answered: 1e-40 used to divide the float32 logits into
    inf - inf = nan, and the request failed with a 500."""
    want = greedy(server, "alpha").choices[0].model_extra["token_ids"]
    for temperature in (1e-40, 5e-324):
        got = greedy(server, "alpha", temperature=temperature, seed=1)
        assert got.choices[0].model_extra["token_ids"] == want
