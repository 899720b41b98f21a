"""vLLM's runtime LoRA API on ``trajforge serve``: load and unload adapters on a running server
(what GRPO's ``--rollout-server`` drives), over loopback HTTP on the tiny model."""

import httpx
import pytest

from trajforge.serve import start_server


def _ids(url, model):
    resp = httpx.post(f"{url}/chat/completions", json={
        "model": model, "temperature": 0, "max_tokens": 8, "return_token_ids": True,
        "messages": [{"role": "user", "content": "How many orders were placed in Berlin?"}]})
    assert resp.status_code == 200, resp.text
    return resp.json()["choices"][0]["token_ids"]


def _models(url):
    return {m["id"] for m in httpx.get(f"{url}/models").json()["data"]}


def test_load_and_unload_adapters_at_runtime(tiny):
    base, adapters = tiny
    with start_server(str(base), {"alpha": adapters["alpha"]}, dtype="float32") as fixed:
        want_alpha = _ids(fixed.url, "alpha")
    with start_server(str(base), {"beta": adapters["beta"]}, dtype="float32") as fixed:
        want_beta = _ids(fixed.url, "beta")
    with start_server(str(base), dtype="float32", allow_adapter_updates=True) as srv:
        plain = _ids(srv.url, str(base))
        for name, path in (("alpha", adapters["alpha"]), ("beta", adapters["beta"])):
            r = httpx.post(f"{srv.url}/load_lora_adapter", json={"lora_name": name, "lora_path": path})
            assert r.status_code == 200 and "added" in r.text
        assert _models(srv.url) == {str(base), "alpha", "beta"}
        # Loaded at runtime, each answers exactly as when loaded at start-up.
        assert _ids(srv.url, "alpha") == want_alpha and _ids(srv.url, "beta") == want_beta
        again = httpx.post(f"{srv.url}/load_lora_adapter", json={"lora_name": "alpha", "lora_path": adapters["alpha"]})
        assert again.status_code == 400 and "already been loaded" in again.text
        assert httpx.post(f"{srv.url}/unload_lora_adapter", json={"lora_name": "alpha"}).status_code == 200
        assert _models(srv.url) == {str(base), "beta"} and _ids(srv.url, "beta") == want_beta
        gone = httpx.post(f"{srv.url}/chat/completions", json={"model": "alpha", "messages": [
            {"role": "user", "content": "hi"}]})
        assert gone.status_code == 404
        assert httpx.post(f"{srv.url}/unload_lora_adapter", json={"lora_name": "beta"}).status_code == 200
        assert _ids(srv.url, str(base)) == plain  # the last one out leaves the plain base model
        missing = httpx.post(f"{srv.url}/unload_lora_adapter", json={"lora_name": "beta"})
        assert missing.status_code == 404 and "cannot be found" in missing.text


@pytest.mark.parametrize("body,needle", [
    ({"lora_name": "x"}, "lora_path"),
    ({"lora_name": "x", "lora_path": "/nonexistent/adapter"}, "adapter_config.json"),
    ({"lora_name": "bad name!", "lora_path": "/tmp"}, "must start with"),
])
def test_bad_load_requests_are_named(tiny, body, needle):
    base, _ = tiny
    with start_server(str(base), dtype="float32", allow_adapter_updates=True) as srv:
        r = httpx.post(f"{srv.url}/load_lora_adapter", json=body)
        assert r.status_code == 400 and needle in r.text, r.text
        assert _models(srv.url) == {str(base)}


def test_runtime_updates_are_off_unless_asked_for(tiny):
    base, adapters = tiny
    with start_server(str(base), dtype="float32") as srv:
        r = httpx.post(f"{srv.url}/load_lora_adapter", json={"lora_name": "a", "lora_path": adapters["alpha"]})
        assert r.status_code == 404 and "--allow-adapter-updates" in r.text
        assert _models(srv.url) == {str(base)}


def test_an_adapter_reloaded_under_its_name_renders_with_its_own_template(tiny, tmp_path):
    """Unloading used to keep the adapter's cached renderer (a tokenizer per name, GRPO loads one per
    step): the next adapter loaded under that name rendered with the unloaded one's template."""
    import json
    import shutil

    from transformers import AutoTokenizer

    from tests.tiny import CHATML

    base, adapters = tiny
    tok = AutoTokenizer.from_pretrained(base)
    for tag in ("first", "second"):  # templates that differ in one word after the role
        folder = tmp_path / tag
        shutil.copytree(adapters["alpha"], folder)
        tok.save_pretrained(folder)
        meta = json.loads((folder / "trajforge_adapter.json").read_text())
        meta["chat_template"] = {"text": CHATML.replace("message['role'] + ", f"message['role'] + ' {tag}' + ")}
        (folder / "trajforge_adapter.json").write_text(json.dumps(meta))
    with start_server(str(base), dtype="float32", allow_adapter_updates=True) as srv:
        for tag in ("first", "second"):
            r = httpx.post(f"{srv.url}/load_lora_adapter", json={"lora_name": "z", "lora_path": str(tmp_path / tag)})
            assert r.status_code == 200, r.text
            prompt = httpx.post(f"{srv.url}/chat/completions", timeout=30, json={
                "model": "z", "max_tokens": 1, "return_token_ids": True,
                "messages": [{"role": "user", "content": "hi"}]}).json()["prompt_token_ids"]
            assert tok.decode(prompt).startswith(f"<|im_start|>user {tag}\nhi")
            assert httpx.post(f"{srv.url}/unload_lora_adapter", json={"lora_name": "z"}).status_code == 200
        assert srv.service._renderers == {}  # nothing kept for adapters no longer served
