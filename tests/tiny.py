"""A tiny random llama and a byte-level BPE tokenizer with a ChatML template, built in the test.

No download: the tokenizer is trained on a few lines of tool-call text, the model is built from a
config. Saved as a normal model folder so ``hf:<path>`` specs work exactly like a real model.
"""

from __future__ import annotations

from pathlib import Path

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CORPUS = [
    '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT COUNT(*) FROM customers WHERE city = \'Lyon\'"}}\n</tool_call>',
    "<tool_response>\ncount\n7\n</tool_response> I'll count the customers. The query returned 7, so I'll submit it.",
    "You are provided with function signatures within <tools></tools> XML tags: submit_answer list_tables describe_table",
    '{"type": "function", "function": {"name": "describe_table", "description": "Describe a table.", "parameters": {}}}',
    "How many orders were placed by customers in Berlin? Answer with a number. products order_items price",
]


def build_tiny_model(path: Path, seed: int = 0) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(CORPUS * 3, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  pad_token="<|im_end|>", unk_token="<|endoftext|>")
    tok.chat_template = CHATML
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    model = LlamaForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def build_tiny_adapter(base, out, seed: int, dialect: str = "hermes"):
    """A LoRA adapter with random (not zero) weights, so it changes what the model says, plus the
    trajforge meta SFT would write."""
    import json

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from trajforge.envs import env_class

    torch.manual_seed(seed)
    net = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    lora = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj", "o_proj"],
                      init_lora_weights=False)
    get_peft_model(net, lora).save_pretrained(out)
    meta = {"toolset_fingerprint": env_class("sql").toolset().fingerprint, "env": "sql",
            "dialect": dialect, "base_model": str(base)}
    (out / "trajforge_adapter.json").write_text(json.dumps(meta))
    return out
