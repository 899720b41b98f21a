"""``trajforge serve`` of an adapter trained with retrieved demonstrations, over loopback HTTP: each
request's prompt gets the block training and the ``hf:`` policy give the same task, token for
token, from the adapter's own pool; a pool changed since is refused before anything loads."""

from __future__ import annotations

import json

import pytest

from tests.tiny import build_tiny_adapter
from trajforge.envs import make_env
from trajforge.grade import graded
from trajforge.harness import HarnessConfig, run_episodes
from trajforge.harness.demos import HEAD, DemoPool
from trajforge.harness.loop import Episode
from trajforge.policies import make_policy
from trajforge.policies.hf import HFPolicy
from trajforge.policies.openai import OpenAIPolicy
from trajforge.serve import start_server
from trajforge.serve.adapters import ServeConfigError, served_models
from trajforge.tasks import synthesize


@pytest.fixture(scope="module")
def tasks():
    return synthesize("sql", 20, seed=0).tasks


@pytest.fixture(scope="module")
def with_demos(tiny, tasks, tmp_path_factory):
    """A LoRA adapter whose meta records a pool of solved train tasks, as `train sft --demos 2` writes."""
    base, _ = tiny
    out = build_tiny_adapter(base, tmp_path_factory.mktemp("demos") / "adapter", seed=3)
    train = [t for t in tasks if t.split == "train"]
    pool = DemoPool.from_trajectories(graded(t) for t in run_episodes(train, make_policy("expert")))
    sha = pool.write(out / "demos.jsonl")
    meta = json.loads((out / "trajforge_adapter.json").read_text())
    meta["demos"] = {"pool": "demos.jsonl", "sha256": sha, "k": 2}
    (out / "trajforge_adapter.json").write_text(json.dumps(meta))
    return str(out)


@pytest.fixture(scope="module")
def server(tiny, with_demos):
    srv = start_server(str(tiny[0]), {"demo": with_demos}, dtype="float32")
    yield srv
    srv.close()


def test_served_prompts_are_the_hf_policys(server, tiny, with_demos, tasks):
    chosen = [next(t for t in tasks if t.split == "train"), next(t for t in tasks if t.split == "heldout")]
    client = OpenAIPolicy(server.url, "demo", token_ids=True, native_tools=False, max_tokens=4)
    trajs = run_episodes(chosen, client, HarnessConfig(max_turns=1))  # the client shows none itself
    local = HFPolicy(str(tiny[0]), adapter=with_demos, dtype="float32")
    for task, traj in zip(chosen, trajs):
        assert traj.messages[1].content == task.prompt
        env = make_env(task.env, seed=task.seed)
        req = Episode(task, 0, env, local, HarnessConfig(), observation=env.reset(task)).request()
        env.close()
        assert HEAD in req.messages[1].content
        assert traj.steps[0].prompt_ids == local.prompt_ids(req)


def test_a_request_that_already_has_the_block_gets_it_once(server, tiny, tasks):
    import httpx
    from transformers import AutoTokenizer

    question = next(t for t in tasks if t.split == "heldout").prompt
    body = {"model": "demo", "max_tokens": 1, "temperature": 0, "return_token_ids": True,
            "messages": [{"role": "user", "content": question}]}
    once = httpx.post(server.url + "/chat/completions", json=body, timeout=30).json()["prompt_token_ids"]
    tok = AutoTokenizer.from_pretrained(str(tiny[0]))
    text = tok.decode(once)
    assert text.count(HEAD) == 1
    shown = text[text.index(HEAD): text.index(question) + len(question)]
    body["messages"][0]["content"] = shown
    twice = httpx.post(server.url + "/chat/completions", json=body, timeout=30).json()["prompt_token_ids"]
    assert twice == once


def test_a_changed_pool_is_refused(tiny, with_demos, tmp_path):
    import shutil

    copy = tmp_path / "changed"
    shutil.copytree(with_demos, copy)
    (copy / "demos.jsonl").write_text((copy / "demos.jsonl").read_text().replace("SELECT", "select"))
    with pytest.raises(ServeConfigError, match="changed after training"):
        served_models(str(tiny[0]), {"demo": str(copy)})


@pytest.mark.parametrize("demos,needle", [
    ({"pool": "demos.jsonl", "k": -2}, "records -2 demonstrations; the number must be 0 or more"),
    ({"k": 2}, "KeyError: 'pool'"),
    ({"pool": "demos.jsonl", "k": "two"}, "ValueError"),
    ([2], "demos record"),
], ids=["negative-k", "no-pool", "k-not-a-number", "not-an-object"])
def test_a_damaged_demos_record_is_refused(tiny, with_demos, tmp_path, demos, needle):
    """A negative k used to show all but the last -k pool tasks (eval refuses it), and a record
    without its fields crashed the CLI (and a runtime load answered 500)."""
    import shutil

    import httpx
    from transformers import AutoTokenizer

    from tests.serve.conftest import ScriptedBackend
    from trajforge.serve import ChatService, Server

    copy = tmp_path / "damaged"
    shutil.copytree(with_demos, copy)
    meta = json.loads((copy / "trajforge_adapter.json").read_text())
    (copy / "trajforge_adapter.json").write_text(json.dumps({**meta, "demos": demos}))
    with pytest.raises(ServeConfigError, match="demo") as e:
        served_models(str(tiny[0]), {"demo": str(copy)})
    assert needle in str(e.value)
    backend = ScriptedBackend(AutoTokenizer.from_pretrained(tiny[0]), lambda adapter, prompt: "hi")
    with Server(ChatService(backend, served_models("tiny", {})), allow_adapter_updates=True) as srv:
        r = httpx.post(srv.url + "/load_lora_adapter", json={"lora_name": "demo", "lora_path": str(copy)})
    assert r.status_code == 400 and needle in r.json()["error"]["message"], r.text


@pytest.mark.parametrize("text,needle", [("{torn", "is not valid JSON"), ("[1]", "holds a JSON list")])
def test_an_adapter_meta_that_is_not_a_json_object_is_refused_by_name(tiny, with_demos, tmp_path, text, needle):
    """A trajforge_adapter.json torn by a killed save crashed `trajforge serve` with a traceback."""
    import shutil

    copy = tmp_path / "torn"
    shutil.copytree(with_demos, copy)
    (copy / "trajforge_adapter.json").write_text(text)
    with pytest.raises(ServeConfigError, match=needle) as e:
        served_models(str(tiny[0]), {"demo": str(copy)})
    assert "trajforge_adapter.json" in str(e.value)
