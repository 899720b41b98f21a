"""Test rollouts at the model boundary: scripted texts, tokenized exactly as the hf policy does.

``TokenScripted`` renders prompts with the real HFPolicy code (dialect + chat template) and turns a
scripted reply into completion ids, so DPO/GRPO see the same kind of steps a sampling policy
stores. Two behaviours: the expert's reference, or the same plan ending in a wrong answer.
"""

from trajforge.policies.base import Generation
from trajforge.policies.hf import HFPolicy
from trajforge.envs.sql.tasks import reasoning_for


def reply(req, wrong: bool) -> str:
    from trajforge.parse import get_dialect
    from trajforge.schema import ToolCall

    ref = req.task.reference
    call = ref[min(req.turn, len(ref) - 1)]
    if wrong and call.name == "submit_answer":
        call = ToolCall(name="submit_answer", arguments={"answer": "-1"})
    return get_dialect("hermes").render_assistant(reasoning_for(req.task, req.turn), [call])


class TokenScripted(HFPolicy):
    """Episodes in admission order alternate: even ones follow the reference, odd ones submit a
    wrong answer (so samples 0 and 1 of a task disagree, deterministically)."""

    def __init__(self, model_path, net, tok, name="scripted-tokens"):
        super().__init__(model_path, name=name, loaded=(net, tok))
        self.episode_no: dict[int, int] = {}

    def act(self, requests):
        out = []
        for req in requests:
            n = self.episode_no.setdefault(id(req.messages), len(self.episode_no))
            text = reply(req, wrong=n % 2 == 1)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
            out.append(Generation(text=text, prompt_ids=self.prompt_ids(req), completion_ids=ids))
        return out
